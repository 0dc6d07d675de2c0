package fabrictest

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// ImmRaceRounds is how many register-then-send rounds testImmRegisterRace
// runs (a quarter with -short).
var ImmRaceRounds = 3000

// testImmRegisterRace hammers the interleaving that once lost immediates:
// a counter registered while the target's worker is in the middle of a
// poll pass over several NICs. Each round registers a fresh counter, then
// sends its immediate on the next NIC while a background stream keeps
// every NIC busy; every counter must see its immediate. A busy goroutine
// per core adds the CPU load under which the race showed.
func testImmRegisterRace(t *testing.T, p Params) {
	env := NewEnv(t, p)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	// Background immediates on a value with a counter, so the target's
	// workers have completions to reap on every NIC in every pass.
	bg, err := env.B.ImmCounter(0xB0B0)
	require.NoError(t, err)
	var sentBG atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			tr := fabric.NewTransfer()
			if env.A.SubmitImm(fabric.ImmWrite{Imm: 0xB0B0, Dst: env.Desc}, fabric.Notify(tr)) != nil {
				return
			}
			if tr.Wait(context.Background()) != nil {
				return
			}
			sentBG.Add(1)
		}
	}()
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for ctx.Err() == nil {
				for i := range 10000 {
					x += i
				}
				runtime.Gosched()
			}
			_ = x
		}()
	}
	rounds := ImmRaceRounds
	if testing.Short() {
		rounds /= 4
	}
	// Rounds are pipelined: counter i is registered and its immediate sent
	// while the immediates of the previous rounds are still arriving, so
	// registrations land in the middle of the target's poll passes.
	const window = 32
	type round struct {
		imm     uint32
		ctr     *fabric.ImmCounter
		reached chan struct{}
		sent    *fabric.Transfer
	}
	check := func(r *round, i int) {
		require.NoError(t, r.sent.Wait(Ctx(t)))
		wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer wcancel()
		var err error
		if r.ctr != nil {
			err = r.ctr.Wait(wctx, 1)
		} else {
			select {
			case <-r.reached:
			case <-wctx.Done():
				err = fmt.Errorf("expected counter never reached: %w", wctx.Err())
			}
		}
		env.B.RemoveImmCount(r.imm)
		require.NoError(t, err, "round %d (nic %d): the immediate sent after its counter was registered was not counted; unclaimed %d",
			i, i%p.NICs, env.B.Stats().Unclaimed)
	}
	ring := make([]round, window)
	for i := range rounds + window {
		r := &ring[i%window]
		if i >= window {
			check(r, i-window)
		}
		if i >= rounds {
			continue
		}
		*r = round{imm: uint32(0x10000 + i), sent: fabric.NewTransfer()}
		if i%2 == 0 {
			r.ctr, err = env.B.ImmCounter(r.imm)
			require.NoError(t, err)
		} else {
			ch := make(chan struct{}, 1)
			r.reached = ch
			_, _, err = env.B.ExpectImm(r.imm, 1, func() bool { ch <- struct{}{}; return false })
			require.NoError(t, err)
		}
		require.NoError(t, env.A.SubmitImm(fabric.ImmWrite{Imm: r.imm, Dst: env.Desc, Route: fabric.Pinned(i % p.NICs)}, fabric.Notify(r.sent)))
	}
	cancel()
	wg.Wait()
	// Every background immediate was counted too.
	require.NoError(t, bg.Wait(Ctx(t), sentBG.Load()))
	require.Zero(t, env.B.Stats().Unclaimed)
}

// testImmHeld: immediates that arrive before any counter exists are kept
// and handed to the first counter registered for them, whatever its kind.
func testImmHeld(t *testing.T, p Params) {
	env := NewEnv(t, p)
	send := func(imm uint32, n int) {
		idx := make([]uint32, n)
		require.NoError(t, Wait(t, func(c fabric.Completion) error {
			return env.A.SubmitPaged(fabric.PagedWrite{Src: env.SrcReg, SrcPages: idx, Dst: env.Desc, DstPages: idx,
				Imm: fabric.Immediate(imm)}, c)
		}))
	}
	waitHeld := func(n uint64) {
		deadline := time.Now().Add(Timeout)
		for env.B.Stats().Unclaimed < n {
			if time.Now().After(deadline) {
				t.Fatalf("waited for %d held immediates, have %d", n, env.B.Stats().Unclaimed)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	send(0x51, 5)
	send(0x52, 7)
	send(0x53, 3)
	waitHeld(15)

	// Credit: all five are there at once.
	ctr, err := env.B.ImmCounter(0x51)
	require.NoError(t, err)
	require.EqualValues(t, 5, ctr.Count())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	require.NoError(t, ctr.Wait(ctx, 5))
	cancel()
	require.EqualValues(t, 10, env.B.Stats().Unclaimed)

	// Expected, repeating, 3 at a time: 7 held fire it twice, one is left
	// and the callback fires once more after two more arrive.
	var fired atomic.Int32
	_, _, err = env.B.ExpectImm(0x52, 3, func() bool { fired.Add(1); return true })
	require.NoError(t, err)
	waitFired := func(n int32) {
		deadline := time.Now().Add(Timeout)
		for fired.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("callback fired %d times, want %d", fired.Load(), n)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	waitFired(2)
	send(0x52, 2)
	waitFired(3)
	Settle()
	require.EqualValues(t, 3, fired.Load())
	prev, had := env.B.RemoveImmCount(0x52)
	require.True(t, had)
	require.EqualValues(t, 0, prev.Count)

	// Flag: the held three pay for an armed wait of three.
	var flag fabric.HostFlag
	fc, err := env.B.FlagCounter(0x53, &flag)
	require.NoError(t, err)
	require.NoError(t, fc.Wait(3))
	require.True(t, flag.IsSet())
	require.Zero(t, env.B.Stats().Unclaimed)
}
