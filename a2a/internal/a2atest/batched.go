package a2atest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
)

// Overflow runs one dispatch on every context of a batched-layout world
// (cfg.MaxTokensPerExpert > 0) that routes every token of every group to
// experts 0..K-1, so expert 0 gets G*MaxTokens copies, more than the
// bound: each rank's Dispatch must fail with ErrExpertOverflow (the CUDA
// backend's kernels also report the wait the failed worker cut short),
// and the context is then broken.
func Overflow(tb testing.TB, cfg a2a.Config, ctxs []*a2a.Context) {
	tb.Helper()
	l := ctxs[0].Layout()
	if int64(l.Groups)*int64(l.MaxTokens) <= int64(l.MaxTokensPerExpert) {
		tb.Fatalf("bound %d cannot overflow with %d groups of %d tokens", l.MaxTokensPerExpert, l.Groups, l.MaxTokens)
	}
	T, K := l.MaxTokens, l.ExpertsPerToken
	idx := make([]uint32, T*K)
	for t := 0; t < T; t++ {
		for k := 0; k < K; k++ {
			idx[t*K+k] = uint32(k)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make([]error, len(ctxs))
	start := time.Now()
	var wg sync.WaitGroup
	for r, c := range ctxs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := a2a.DispatchInput{Tokens: T, X: make([]byte, T*l.TokenBytes), Scales: make([]float32, T*l.Scales),
				Indices: idx}
			out := a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), X: make([]byte, l.OutputRows*l.TokenBytes),
				Scales: make([]float32, l.OutputRows*l.Scales)}
			errs[r] = c.Dispatch(ctx, &in, &out)
		}()
	}
	wg.Wait()
	// Every rank detects the overflow itself from the count table, so
	// none of them waits out its backend's timeout for another.
	tb.Logf("overflow reported by every rank after %v", time.Since(start).Round(time.Millisecond))
	for r, err := range errs {
		if !errors.Is(err, a2a.ErrExpertOverflow) {
			tb.Errorf("rank %d: dispatch over the bound: %v, want ErrExpertOverflow", r, err)
		}
	}
	for r, c := range ctxs {
		err := c.DispatchSend(ctx, &a2a.DispatchInput{Indices: idx})
		if !errors.Is(err, a2a.ErrBroken) {
			tb.Errorf("rank %d: call after the overflow: %v, want ErrBroken", r, err)
		}
	}
}
