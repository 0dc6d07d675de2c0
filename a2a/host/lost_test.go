package host_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	"github.com/ferryrdma/ferry/a2a/workload"
	"github.com/ferryrdma/ferry/fabric"
)

// lostWorld builds W ranks over mem engines (one per rank) with the
// backend timeout given, and closes everything at the end.
func lostWorld(t *testing.T, cfg a2a.Config, timeout time.Duration) ([]*a2a.Context, []*fabric.Engine) {
	t.Helper()
	ctxs, engines, _ := lostWorldNodes(t, cfg, timeout)
	return ctxs, engines
}

// lostWorldNodes is lostWorld, returning the domains' LocalNodes too.
func lostWorldNodes(t *testing.T, cfg a2a.Config, timeout time.Duration) ([]*a2a.Context, []*fabric.Engine, []*host.LocalNode) {
	t.Helper()
	W := cfg.WorldSize
	l, _ := cfg.Layout()
	x := a2atest.NewExchange(W)
	nodes := make([]*host.LocalNode, l.Nodes)
	for n := range nodes {
		nodes[n] = host.NewLocalNode(l.NVLinkSize)
	}
	engines := make([]*fabric.Engine, W)
	ctxs := make([]*a2a.Context, W)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, W)
	for r := range W {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := openEngine(ctx, l.NICsPerGPU)
			if err != nil {
				errs[r] = err
				return
			}
			engines[r] = e
			c := cfg
			c.Rank = r
			b, err := host.New(ctx, c, host.Options{Engine: e, Exchange: x.Member(r),
				Node: nodes[l.Node(r)].Member(r % l.NVLinkSize), Timeout: timeout})
			if err == nil {
				ctxs[r], err = a2a.New(c, b)
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		for r := range W {
			_ = ctxs[r].Close()
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = engines[r].Close(cctx)
			cancel()
		}
	})
	return ctxs, engines, nodes
}

// openEngine opens a mem engine that notices lost peers quickly.
func openEngine(ctx context.Context, nics int) (*fabric.Engine, error) {
	return fabric.Open(ctx, fabric.Config{Transport: "mem", NICs: nics, LivenessInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
}

// dispatchAll runs one Dispatch on every rank but skip, at once, under a
// context far longer than the backend's timeout, and returns their errors
// and how long the slowest took.
func dispatchAll(t *testing.T, cfg a2a.Config, ctxs []*a2a.Context, skip int) ([]error, time.Duration) {
	l, _ := cfg.Layout()
	in, err := workload.NewIteration(rand.New(rand.NewPCG(9, 9)), cfg, &l)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(ctxs))
	for r := range ctxs {
		if r == skip {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := &in.Groups[l.Group(r)]
			out := a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), X: make([]byte, l.OutputRows*l.TokenBytes),
				Scales: make([]float32, l.OutputRows*l.Scales)}
			callCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			errs[r] = ctxs[r].Dispatch(callCtx, &a2a.DispatchInput{Tokens: g.Tokens, X: g.X, Scales: g.Scales, Indices: g.Indices}, &out)
		}()
	}
	wg.Wait()
	return errs, time.Since(start)
}

var lostCfg = a2a.Config{WorldSize: 3, MaxTokens: 8, Hidden: 16, DispatchType: a2a.BF16, CombineType: a2a.BF16,
	Experts: 6, ExpertsPerToken: 2}

// TestLostRank: a rank whose process dies (here: its engine closes under
// it) makes the others' calls fail well within the backend's timeout, with
// an error naming it, instead of hanging.
func TestLostRank(t *testing.T) {
	const timeout, lost = 5 * time.Second, 2
	cfg := lostCfg
	ctxs, engines := lostWorld(t, cfg, timeout)
	// One good iteration first: everything works.
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs}, 5, 1)

	// The rank dies: its engine goes away without a word.
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	require(t, engines[lost].Close(cctx) == nil, "close the lost rank's engine")
	ccancel()
	callErrs, took := dispatchAll(t, cfg, ctxs, lost)
	for r, err := range callErrs {
		if r == lost {
			continue
		}
		var re *a2a.RankError
		if !errors.As(err, &re) || re.Rank != lost || !errors.Is(err, a2a.ErrPeerLost) {
			t.Fatalf("rank %d: error %v does not name rank %d as lost", r, err, lost)
		}
		t.Logf("rank %d: %v", r, err)
	}
	require(t, took < timeout, "the calls failed after %v, past the %v timeout", took, timeout)
	t.Logf("the survivors' dispatch failed %v after the rank was lost", took)
}

// TestSilentRank: a rank that is alive but never takes part makes the
// others' calls fail with a timeout once the backend's timeout passes
// (their own context is far longer), never a hang.
func TestSilentRank(t *testing.T) {
	const timeout, silent = time.Second, 1
	cfg := lostCfg
	ctxs, _ := lostWorld(t, cfg, timeout)
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs}, 6, 1)
	callErrs, took := dispatchAll(t, cfg, ctxs, silent)
	for r, err := range callErrs {
		if r == silent {
			continue
		}
		if !errors.Is(err, a2a.ErrTimeout) {
			t.Fatalf("rank %d: %v, want a timeout", r, err)
		}
		t.Logf("rank %d: %v", r, err)
	}
	require(t, took >= timeout && took < timeout+5*time.Second, "the calls ended after %v; timeout %v", took, timeout)
}

func require(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Fatalf(format, args...)
	}
}

// TestLostRankCarryOn: after a rank dies mid-run (its engine closes under
// it), the survivors' next call fails naming it; they take a membership
// without it and run on, every iteration equal to the masked oracle (its
// experts' rows dropped and reported, its node peer carrying on alone in
// their domain).
func TestLostRankCarryOn(t *testing.T) {
	const timeout, lost = 5 * time.Second, 1
	cfg := a2a.Config{WorldSize: 4, NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 8, Hidden: 16, Scales: 2,
		DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 10, ExpertsPerToken: 3, PrivateTokens: 2}
	ctxs, engines := lostWorld(t, cfg, timeout)
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs}, 21, 1)

	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	require(t, engines[lost].Close(cctx) == nil, "close the lost rank's engine")
	ccancel()
	callErrs, took := dispatchAll(t, cfg, ctxs, lost)
	for r, err := range callErrs {
		var re *a2a.RankError
		if r != lost && (!errors.As(err, &re) || re.Rank != lost) {
			t.Fatalf("rank %d: error %v does not name rank %d as lost", r, err, lost)
		}
	}
	t.Logf("the survivors' dispatch failed %v after the rank was lost", took)

	active := []bool{true, false, true, true}
	start := time.Now()
	a2atest.SetActive(t, ctxs, 1, active, nil)
	t.Logf("the survivors took generation 1 in %v", time.Since(start))
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs, Active: active}, 22, 4)
}

// TestSilentRankCarryOn: the survivors carry on without a rank that is
// alive but stopped taking part, once their calls timed out.
func TestSilentRankCarryOn(t *testing.T) {
	const timeout, silent = time.Second, 2
	cfg := lostCfg
	ctxs, _ := lostWorld(t, cfg, timeout)
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs}, 23, 1)
	callErrs, _ := dispatchAll(t, cfg, ctxs, silent)
	for r, err := range callErrs {
		if r != silent && !errors.Is(err, a2a.ErrTimeout) {
			t.Fatalf("rank %d: %v, want a timeout", r, err)
		}
	}
	active := []bool{true, true, false}
	a2atest.SetActive(t, ctxs, 1, active, nil)
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs, Active: active}, 24, 3)
}

// TestLostRankRejoins: a lost rank restarts (a new engine, new buffers, a
// backend built to join) and comes back through an explicit membership
// change with a descriptor exchange among the members; everyone then runs
// on with all ranks, equal to the oracle.
func TestLostRankRejoins(t *testing.T) {
	const timeout, lost = 5 * time.Second, 0
	cfg := lostCfg
	ctxs, engines := lostWorld(t, cfg, timeout)
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs}, 25, 1)
	killRank(t, cfg, ctxs, engines, lost)
	without := []bool{false, true, true}
	a2atest.SetActive(t, ctxs, 1, without, nil)
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs, Active: without}, 26, 2)

	// The restarted rank: a fresh engine and a backend built to join.
	restartRank(t, cfg, ctxs, lost, host.NewLocalNode(1).Member(0), timeout)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A joining context does nothing before it joined.
	err := ctxs[lost].Dispatch(ctx, &a2a.DispatchInput{}, &a2a.DispatchOutput{ExpertTokens: make([]int32, 2),
		X: make([]byte, 1<<16)})
	require(t, errors.Is(err, a2a.ErrCallOrder), "dispatch before joining: %v", err)

	all := []bool{true, true, true}
	a2atest.SetActive(t, ctxs, 2, all, a2atest.NewExchange(3))
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs, Active: all}, 27, 3)
}

// killRank closes rank lost's engine under it (its process dying, as
// far as the others can tell) and has the others dispatch: each must fail
// with the rank lost.
func killRank(t *testing.T, cfg a2a.Config, ctxs []*a2a.Context, engines []*fabric.Engine, lost int) {
	t.Helper()
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	require(t, engines[lost].Close(cctx) == nil, "close the lost rank's engine")
	ccancel()
	callErrs, _ := dispatchAll(t, cfg, ctxs, lost)
	for r, err := range callErrs {
		if r != lost && !errors.Is(err, a2a.ErrPeerLost) {
			t.Fatalf("rank %d: %v, want the rank lost", r, err)
		}
	}
}

// restartRank replaces rank lost's context with that of a restarted
// process: a fresh engine and a backend built to join over node.
func restartRank(t *testing.T, cfg a2a.Config, ctxs []*a2a.Context, lost int, node host.NodeMemory, timeout time.Duration) {
	t.Helper()
	_ = ctxs[lost].Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := openEngine(ctx, 1)
	require(t, err == nil, "open the restarted rank's engine: %v", err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = e.Close(cctx)
		cancel()
	})
	c := cfg
	c.Rank = lost
	b, err := host.New(ctx, c, host.Options{Engine: e, Node: node, Timeout: timeout, Join: true})
	require(t, err == nil, "restarted backend: %v", err)
	ctxs[lost], err = a2a.New(c, b)
	require(t, err == nil, "restarted context: %v", err)
}
