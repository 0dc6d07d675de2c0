package host_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
)

// TestLostNodePeerRejoins: a rank dies while its node peer stays active
// (W=4, two domains of two, rank 1 lost, rank 0 carries on); the survivors
// run without it, then it restarts (a new backend built to join, new
// buffers from the same LocalNode) and comes back: rank 0 maps its new
// buffers in place of the dead ones and it maps rank 0's, during
// SetActiveRanks. Every iteration after equals the oracle.
func TestLostNodePeerRejoins(t *testing.T) {
	const timeout, lost = 5 * time.Second, 1
	cfg := a2a.Config{WorldSize: 4, NVLinkSize: 2, MaxTokens: 8, Hidden: 16, Scales: 2,
		DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 10, ExpertsPerToken: 3, PrivateTokens: 2}
	ctxs, engines, nodes := lostWorldNodes(t, cfg, timeout)
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs}, 41, 1)
	killRank(t, cfg, ctxs, engines, lost)
	without := []bool{true, false, true, true}
	a2atest.SetActive(t, ctxs, 1, without, nil)
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs, Active: without}, 42, 2)

	// The restarted rank: its old member released, a fresh engine, a new
	// member of the same domain, a backend built to join.
	restartRank(t, cfg, ctxs, lost, nodes[0].Member(lost), timeout)

	all := []bool{true, true, true, true}
	a2atest.SetActive(t, ctxs, 2, all, a2atest.NewExchange(4))
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs, Active: all}, 43, 3)
	// A later change without a restart reshares nothing and runs on.
	a2atest.SetActive(t, ctxs, 3, all, a2atest.NewExchange(4))
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs, Active: all}, 44, 1)
}

// TestNodePeerRejoinTimesOut: a restarted rank whose node peer never
// comes to the membership change fails within its context with a
// timeout, and leaves its context broken, not hung.
func TestNodePeerRejoinTimesOut(t *testing.T) {
	cfg := a2a.Config{WorldSize: 2, NVLinkSize: 2, MaxTokens: 4, Hidden: 8, DispatchType: a2a.BF16,
		CombineType: a2a.BF16, Experts: 4, ExpertsPerToken: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := openEngine(ctx, 1)
	require(t, err == nil, "open engine: %v", err)
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = e.Close(cctx)
		cancel()
	}()
	node := host.NewLocalNode(2)
	c := cfg
	c.Rank = 1
	b, err := host.New(ctx, c, host.Options{Engine: e, Node: node.Member(1), Timeout: time.Second, Join: true})
	require(t, err == nil, "joining backend: %v", err)
	ac, err := a2a.New(c, b)
	require(t, err == nil, "context: %v", err)
	defer ac.Close()
	// Rank 0 answers the exchange with rank 1's own message (so rank 1's
	// join signals for it land on rank 1 itself), but never reshares.
	start := time.Now()
	err = ac.SetActiveRanks(ctx, a2a.Membership{Generation: 1, Active: []bool{true, true}, Exchange: echoExchange{}})
	require(t, errors.Is(err, a2a.ErrTimeout), "set active ranks: %v, want a timeout", err)
	require(t, time.Since(start) < 5*time.Second, "took %v", time.Since(start))
	t.Logf("%v after %v", err, time.Since(start))
}

// echoExchange answers an all-gather of two members with the caller's
// message twice.
type echoExchange struct{}

func (echoExchange) AllGather(_ context.Context, data []byte) ([][]byte, error) {
	return [][]byte{data, data}, nil
}

// TestNodePeerMissedRestart: in a domain of three, rank 1 dies and rank 2
// is masked out (alive, idle) before rank 1 restarts and rejoins beside
// rank 0. Rank 2 still maps the dead incarnation's buffers and ranks 0
// and 1 map none of rank 2's, so bringing rank 2 back without an
// Exchange is refused on ranks 0 and 1 (ErrInvalidArgument, no panic) and
// fails on rank 2 (the dead incarnation lost, or a timeout); with an
// Exchange, all three reshare and every
// iteration equals the oracle.
func TestNodePeerMissedRestart(t *testing.T) {
	const timeout, lost = 2 * time.Second, 1
	cfg := a2a.Config{WorldSize: 3, NVLinkSize: 3, MaxTokens: 6, Hidden: 16, DispatchType: a2a.BF16,
		CombineType: a2a.FP32, Experts: 6, ExpertsPerToken: 2}
	ctxs, engines, nodes := lostWorldNodes(t, cfg, timeout)
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs}, 51, 1)
	killRank(t, cfg, ctxs, engines, lost)
	a2atest.SetActive(t, ctxs, 1, []bool{true, false, true}, nil)
	a2atest.SetActive(t, ctxs, 2, []bool{true, false, false}, nil) // rank 2 masked out, idle

	restartRank(t, cfg, ctxs, lost, nodes[0].Member(lost), timeout)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pair := []bool{true, true, false}
	a2atest.SetActive(t, ctxs, 3, pair, a2atest.NewExchange(2))
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs, Active: pair}, 52, 1)

	all := []bool{true, true, true}
	errs := make([]error, 3)
	done := make(chan int, 3)
	for r := range 3 {
		go func() {
			errs[r] = ctxs[r].SetActiveRanks(ctx, a2a.Membership{Generation: 4, Active: all})
			done <- r
		}()
	}
	for range 3 {
		<-done
	}
	for r := range 2 {
		require(t, errors.Is(errs[r], a2a.ErrInvalidArgument), "rank %d without an exchange: %v, want refused", r, errs[r])
	}
	require(t, errors.Is(errs[2], a2a.ErrTimeout) || errors.Is(errs[2], a2a.ErrPeerLost),
		"rank 2 without an exchange: %v, want a timeout or the old rank 1 lost", errs[2])
	a2atest.SetActive(t, ctxs, 5, all, a2atest.NewExchange(3))
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs, Active: all}, 53, 2)
}
