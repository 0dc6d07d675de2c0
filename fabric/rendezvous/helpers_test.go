package rendezvous_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// leakCheck fails the test if goroutines started during it outlive it.
func leakCheck(t *testing.T) { testutil.LeakCheck(t) }

const testToken = "0123456789abcdef"

// world returns configs for n ranks sharing a loopback listener that rank 0
// takes over.
func world(t *testing.T, n int) []rendezvous.Config {
	cfgs, err := newWorld(n)
	require.NoError(t, err)
	return cfgs
}

func newWorld(n int) ([]rendezvous.Config, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	cfgs := make([]rendezvous.Config, n)
	for r := range cfgs {
		cfgs[r] = rendezvous.Config{Rank: r, WorldSize: n, LocalRank: r, Master: ln.Addr().String(), Token: testToken}
	}
	cfgs[0].Listener = ln
	return cfgs, nil
}

// joinAll joins ranks concurrently and returns the groups and errors.
func joinAll(ctx context.Context, cfgs []rendezvous.Config, ranks []int) ([]*rendezvous.Group, []error) {
	gs := make([]*rendezvous.Group, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Go(func() { gs[r], errs[r] = rendezvous.Join(ctx, cfgs[r]) })
	}
	wg.Wait()
	return gs, errs
}

func closeAll(gs []*rendezvous.Group) {
	// Rank 0 last: it hosts the store.
	for i := len(gs) - 1; i >= 0; i-- {
		if gs[i] != nil {
			gs[i].Close()
		}
	}
}

// missDeadline is the deadline of the tests' joins and collectives that
// are meant to time out waiting for a missing rank. Rank 0 reports the
// missing ranks min(deadline/5, 500 ms) before it, and a caller waits
// LateReportGrace past it for that report: from 2.5 s on, the report has
// the most time there is (700 ms) to reach the callers on a loaded
// machine, and the ranks that do come have 2 s to connect.
const missDeadline = 2500 * time.Millisecond
