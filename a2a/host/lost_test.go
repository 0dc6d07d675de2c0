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
	"github.com/ferryrdma/ferry/a2a/internal/workload"
	"github.com/ferryrdma/ferry/fabric"
)

// lostWorld builds W ranks over mem engines (one per rank) with the
// backend timeout given, and closes everything at the end.
func lostWorld(t *testing.T, cfg a2a.Config, timeout time.Duration) ([]*a2a.Context, []*fabric.Engine) {
	t.Helper()
	W := cfg.WorldSize
	x := a2atest.NewExchange(W)
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
			e, err := fabric.Open(ctx, fabric.Config{Transport: "mem", LivenessInterval: 50 * time.Millisecond,
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				errs[r] = err
				return
			}
			engines[r] = e
			c := cfg
			c.Rank = r
			b, err := host.New(ctx, c, host.Options{Engine: e, Exchange: x.Member(r), Node: host.NewLocalNode(1).Member(0),
				Timeout: timeout})
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
	return ctxs, engines
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
			out := a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), X: make([]byte, l.OutputRows*l.TokenBytes)}
			callCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			errs[r] = ctxs[r].Dispatch(callCtx, &a2a.DispatchInput{Tokens: g.Tokens, X: g.X, Indices: g.Indices}, &out)
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
