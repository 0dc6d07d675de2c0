package a2atest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/workload"
)

// World is W contexts over some backend, and what runs between iterations.
type World struct {
	Contexts []*a2a.Context
	// BeforeIteration, if set, runs before each iteration (poisoning
	// buffers, for instance).
	BeforeIteration func(it int)
	// Timeout bounds each iteration (default 30 s).
	Timeout time.Duration
	// Active, when set, names the ranks that take part (the others'
	// contexts are not used and may be nil); results are checked against
	// the masked oracle.
	Active []bool
}

// Run drives iters iterations of dispatch and combine on every rank at
// once, with fresh random inputs each time, and compares each rank's
// dispatch output (counts, offsets, rows, scales) and combine output with
// the oracle, bit for bit.
func Run(tb testing.TB, cfg a2a.Config, w *World, seed uint64, iters int) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	W := cfg.WorldSize
	var l *a2a.Layout
	for r, c := range w.Contexts {
		if w.Active == nil || w.Active[r] {
			l = c.Layout()
			break
		}
	}
	timeout := w.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	for it := 0; it < iters; it++ {
		in, err := workload.NewIterationActive(rng, cfg, l, w.Active)
		if err != nil {
			tb.Fatal(err)
		}
		groups, want, ys, prev, wantOut, accumulate := in.Groups, in.Want, in.Ys, in.Prev, in.WantOut, in.Accumulate
		if w.BeforeIteration != nil {
			w.BeforeIteration(it)
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		errs := make([]error, W)
		douts := make([]a2a.DispatchOutput, W)
		couts := make([]a2a.CombineOutput, W)
		var wg sync.WaitGroup
		for r, c := range w.Contexts {
			if w.Active != nil && !w.Active[r] {
				continue
			}
			g := &groups[l.Group(r)]
			douts[r] = a2a.DispatchOutput{
				ExpertTokens:   make([]int32, l.LocalExperts),
				ExpertOffsets:  make([]int32, l.LocalExperts+1),
				X:              make([]byte, l.OutputRows*l.TokenBytes),
				Scales:         make([]float32, l.OutputRows*l.Scales),
				DroppedExperts: make([]int32, l.Experts),
			}
			couts[r] = a2a.CombineOutput{
				Out:        append([]byte(nil), prev[l.Group(r)]...),
				Weights:    g.Weights,
				Accumulate: accumulate,
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				in := a2a.DispatchInput{Tokens: g.Tokens, X: g.X, Scales: g.Scales, Indices: g.Indices}
				if err := c.Dispatch(ctx, &in, &douts[r]); err != nil {
					errs[r] = fmt.Errorf("dispatch: %w", err)
					return
				}
				if err := c.Combine(ctx, &a2a.CombineInput{Y: ys[r]}, &couts[r]); err != nil {
					errs[r] = fmt.Errorf("combine: %w", err)
				}
			}()
		}
		wg.Wait()
		cancel()
		for r, err := range errs {
			if err != nil {
				tb.Fatalf("iteration %d rank %d: %v", it, r, err)
			}
		}
		for r := range w.Contexts {
			if w.Active != nil && !w.Active[r] {
				continue
			}
			if err := workload.Compare(l, &want[r], &douts[r]); err != nil {
				tb.Fatalf("iteration %d rank %d: %v", it, r, err)
			}
			if err := workload.CheckDropped(l, &groups[l.Group(r)], w.Active, &douts[r]); err != nil {
				tb.Fatalf("iteration %d rank %d: %v", it, r, err)
			}
			if string(couts[r].Out) != string(wantOut[l.Group(r)]) {
				tb.Fatalf("iteration %d rank %d: combine output differs from the oracle", it, r)
			}
		}
	}
}
