package fabric

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Several workers counting at once never lose or double an arrival: every
// immediate is either counted (reached events x expected + final count) or,
// after removal, handed back as plain.
func TestImmEntryConcurrentArrivalsAndRemoval(t *testing.T) {
	for _, mode := range []immMode{immExpected, immCredit} {
		ent := &immEntry{mode: mode, expected: 7, wake: make(chan struct{}, 1)}
		const workers, each = 4, 20000
		var wg sync.WaitGroup
		var mu sync.Mutex
		reached, plain := 0, 0
		for w := 0; w < workers; w++ {
			wg.Go(func() {
				r, p := 0, 0
				for i := 0; i < each; i++ {
					rr, counted := ent.arrive()
					if !counted {
						p++
					} else if rr {
						r++
					}
				}
				mu.Lock()
				reached += r
				plain += p
				mu.Unlock()
			})
		}
		time.Sleep(time.Millisecond)
		final, ok := ent.remove()
		require.True(t, ok)
		wg.Wait()
		total := reached*7 + int(final) + plain
		if mode == immCredit {
			total = int(final) + plain
		}
		require.Equal(t, workers*each, total, "mode %d", mode)
		_, ok = ent.remove()
		require.False(t, ok, "a second removal finds nothing")
	}
}

func TestCreditWaitKeepsEarlyArrivalsAndReturnsCreditsOnCancel(t *testing.T) {
	ent := &immEntry{mode: immCredit, wake: make(chan struct{}, 1)}
	c := &ImmCounter{e: ent}
	for i := 0; i < 3; i++ {
		ent.arrive()
	}
	require.NoError(t, c.Wait(context.Background(), 2))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, c.Wait(ctx, 5), ErrTimeout)
	require.EqualValues(t, 1, c.Count(), "cancelled credits are given back")
	done := make(chan error)
	go func() { done <- c.Wait(context.Background(), 3) }()
	time.Sleep(2 * time.Millisecond)
	ent.arrive()
	ent.arrive()
	require.NoError(t, <-done)
}

func TestFlagModeRaisesOnPaidCredits(t *testing.T) {
	var f HostFlag
	ent := &immEntry{mode: immFlag, flag: &f}
	fc := &FlagCounter{e: ent}
	require.NoError(t, fc.Wait(2))
	ent.arrive()
	require.False(t, f.IsSet())
	ent.arrive()
	require.True(t, f.IsSet())
	f.Clear()
	ent.arrive() // surplus carries over
	require.NoError(t, fc.Wait(1))
	require.True(t, f.IsSet())
}
