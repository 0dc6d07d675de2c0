package host_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
)

// BenchmarkHostDecode runs whole iterations (dispatch and combine, both
// halves, every rank at once) of a decode-shaped step on 4 in-process
// ranks in 2 domains over the "mem" provider with 2 NICs: the cost of the
// host backend's Go loops and of the engine, not of a network.
func BenchmarkHostDecode(b *testing.B) {
	cfg := a2a.Config{WorldSize: 4, NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 128, Hidden: 7168, Scales: 56,
		DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 32, ExpertsPerToken: 8}
	ctxs := world(b, cfg, "mem")
	l := ctxs[0].Layout()
	T, K := l.MaxTokens, l.ExpertsPerToken
	type rankIO struct {
		in   a2a.DispatchInput
		dout a2a.DispatchOutput
		cin  a2a.CombineInput
		cout a2a.CombineOutput
	}
	io := make([]*rankIO, cfg.WorldSize)
	rng := rand.New(rand.NewPCG(1, 1))
	for r := range io {
		idx := make([]uint32, T*K)
		for t := 0; t < T; t++ {
			for k, e := range rng.Perm(l.Experts)[:K] {
				idx[t*K+k] = uint32(e)
			}
		}
		w := make([]float32, T*K)
		for i := range w {
			w[i] = 1.0 / float32(K)
		}
		io[r] = &rankIO{
			in: a2a.DispatchInput{Tokens: T, X: make([]byte, T*l.TokenBytes), Scales: make([]float32, T*l.Scales), Indices: idx},
			dout: a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), X: make([]byte, l.OutputRows*l.TokenBytes),
				Scales: make([]float32, l.OutputRows*l.Scales)},
			cin:  a2a.CombineInput{Y: make([]byte, l.OutputRows*l.CombineBytes)},
			cout: a2a.CombineOutput{Out: make([]byte, T*l.CombineBytes), Weights: w},
		}
	}
	b.SetBytes(int64(T * K * (l.TokenBytes + l.ScaleBytes + l.CombineBytes)))
	b.ReportAllocs()
	var dispatchNs, combineNs int64
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var wg sync.WaitGroup
		errs := make([]error, len(ctxs))
		for r, c := range ctxs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				if errs[r] = c.Dispatch(ctx, &io[r].in, &io[r].dout); errs[r] != nil {
					return
				}
				t1 := time.Now()
				errs[r] = c.Combine(ctx, &io[r].cin, &io[r].cout)
				if r == 0 {
					dispatchNs += t1.Sub(t0).Nanoseconds()
					combineNs += time.Since(t1).Nanoseconds()
				}
			}()
		}
		wg.Wait()
		cancel()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(dispatchNs)/float64(b.N)/1e3, "dispatch_us")
	b.ReportMetric(float64(combineNs)/float64(b.N)/1e3, "combine_us")
}
