package emulated_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/cudabackend/emulated"
	"github.com/ferryrdma/ferry/cuda/emu"
)

// TestEmuChaosAborts runs whole iterations in the emulator's chaos mode
// (a thread switch at every scoped load, random thread order, stalled
// blocks) under call deadlines short enough that the kernels' waits give
// up at random points, in random blocks, while other blocks of the same
// launch go on: every launch must end with the kernels' own verdict (a
// KernelError wrapping ErrTimeout, or success), never with threads of a
// block split between barriers (the emulator reports that as a failed
// launch, ErrKernel), a hang or a grid left waiting. On worlds of two
// domains one rank's worker fails too (its RDMA flush is made to fail). Seeds:
// FERRY_A2A_EMU_CHAOS=<n> (make test-a2a-full runs more).
func TestEmuChaosAborts(t *testing.T) {
	n := 24
	if s := os.Getenv("FERRY_A2A_EMU_CHAOS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	cfgs := []a2a.Config{
		{WorldSize: 2, MaxTokens: 8, Hidden: 16, DispatchType: a2a.BF16, CombineType: a2a.BF16,
			Experts: 4, ExpertsPerToken: 2, PrivateTokens: 1},
		{WorldSize: 2, NVLinkSize: 2, MaxTokens: 8, Hidden: 16, DispatchType: a2a.BF16, CombineType: a2a.BF16,
			Experts: 4, ExpertsPerToken: 2},
	}
	aborted, completed := 0, 0
	for seed := 1; seed <= n; seed++ {
		cfg := cfgs[seed%len(cfgs)]
		t.Run(fmt.Sprintf("seed%d_S%d", seed, max(cfg.NVLinkSize, 1)), func(t *testing.T) {
			t.Setenv(emu.ChaosEnv, strconv.Itoa(seed))
			rng := rand.New(rand.NewPCG(uint64(seed), 20))
			// Kernel waits give up after 1 to 80 ms: mid-launch on the
			// emulator. The calls' own deadlines are far away, so every
			// launch ends by the kernels' decision (the emulator would
			// cancel a launch that outlived its call's context).
			opt := cudabackend.Options{Grid: 8, Block: 32, Timeout: time.Duration(1+rng.IntN(80)) * time.Millisecond}
			// Worker failures: on multi-domain seeds, one rank's RDMA flush
			// fails at its first call, mid-dispatch: its worker fails and
			// its kernels' waits give up at once.
			failRank := rng.IntN(cfg.WorldSize)
			var rank atomic.Int32
			w := newWorldOn(t, cfg, "mem", opt, func() cudabackend.Device {
				if int(rank.Add(1)-1) != failRank {
					return emulated.NewDevice()
				}
				return emulated.NewFlushingDevice(func() error { return errInjected })
			})
			l := w.l
			errs := make([]error, cfg.WorldSize)
			var wg sync.WaitGroup
			for r := range cfg.WorldSize {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[r] = chaosIteration(w.ctxs[r], &l, time.Minute)
				}()
			}
			wg.Wait()
			for r, err := range errs {
				switch {
				case err == nil:
					completed++
				case errors.Is(err, cudabackend.ErrKernel) || !(errors.Is(err, a2a.ErrTimeout) || errors.Is(err, a2a.ErrBroken)):
					t.Fatalf("rank %d: %v, want success or the kernels' timeout", r, err)
				default:
					aborted++
					t.Logf("rank %d: %v", r, err)
				}
			}
		})
	}
	t.Logf("%d calls aborted mid-launch, %d completed", aborted, completed)
	if aborted == 0 && n > 0 {
		t.Fatalf("no call was aborted: the test did not exercise the abort path")
	}
}

var errInjected = errors.New("injected flush failure")

// chaosIteration runs one dispatch and combine of m tokens on c, each call
// with deadline d.
func chaosIteration(c *a2a.Context, l *a2a.Layout, d time.Duration) error {
	m, K := l.MaxTokens, l.ExpertsPerToken
	in := a2a.DispatchInput{Tokens: m, X: make([]byte, m*l.TokenBytes), Indices: make([]uint32, m*K)}
	for t := range m {
		for k := range K {
			in.Indices[t*K+k] = uint32((t + k) % l.Experts)
		}
	}
	out := a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), X: make([]byte, l.OutputRows*l.TokenBytes)}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	err := c.Dispatch(ctx, &in, &out)
	cancel()
	if err != nil {
		return err
	}
	y := a2a.CombineInput{Y: make([]byte, l.OutputRows*l.CombineBytes)}
	res := a2a.CombineOutput{Out: make([]byte, m*l.CombineBytes), Weights: make([]float32, m*K)}
	ctx, cancel = context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Combine(ctx, &y, &res)
}
