package emulated_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/cudabackend/emulated"
)

// mutatedDevice builds every kernel source with one text replaced: a
// kernel bug injected on purpose.
type mutatedDevice struct {
	emulated.Device
	from, to string
}

func (d mutatedDevice) Load(ctx context.Context, builds []cudabackend.Build) (cudabackend.Program, error) {
	mutated := append([]cudabackend.Build(nil), builds...)
	for i := range mutated {
		mutated[i].Source.Code = strings.ReplaceAll(mutated[i].Source.Code, d.from, d.to)
	}
	return d.Device.Load(ctx, mutated)
}

// TestEmuScopeMutations: the kernels' cross-rank flags (node peers write
// them over NVLink, the CPU worker over RDMA) need sys scope, and the
// emulator's scope checker says so when one side is weakened to gpu
// scope. The unmutated kernels run clean under the same checker in every
// other test of this package (each rank is its own emulated device).
func TestEmuScopeMutations(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	cfg := a2a.Config{WorldSize: 4, NVLinkSize: 2, MaxTokens: 4, Hidden: 16, DispatchType: a2a.BF16,
		CombineType: a2a.BF16, Experts: 4, ExpertsPerToken: 2}
	for _, c := range []struct {
		name, from, to string
		want           []string
	}{
		{"wait-at-gpu-scope", "a2a_reached(fd_ld_acquire_sys(flag), want)", "a2a_reached(fd_ld_acquire_gpu(flag), want)",
			[]string{"ld.acquire.gpu", "need", "sys"}},
		{"signal-at-gpu-scope", "fd_st_release_sys(slot, iter)", "fd_st_release_gpu(slot, iter)",
			[]string{"st.release.gpu", "the store's scope", "need sys scope"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorldOn(t, cfg, "mem", cudabackend.Options{Timeout: 2 * time.Second}, func() cudabackend.Device {
				return mutatedDevice{emulated.NewDevice(), c.from, c.to}
			})
			l := w.l
			// A store is checked against a load only while both launches
			// may overlap (a launch that ended first is ordered by the
			// kernel boundary), which launch timing decides: iterate until
			// one overlaps. Each iteration has several chances.
			var found string
			for it := 0; it < 8 && found == ""; it++ {
				errs := make([]error, cfg.WorldSize)
				var wg sync.WaitGroup
				for r, cx := range w.ctxs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
						defer cancel()
						in := a2a.DispatchInput{Tokens: 2, X: make([]byte, 2*l.TokenBytes),
							Indices: []uint32{uint32((r + 1) % cfg.Experts), uint32((r + 2) % cfg.Experts),
								uint32((r + 3) % cfg.Experts), uint32(r % cfg.Experts)}}
						out := a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), X: make([]byte, l.OutputRows*l.TokenBytes)}
						if errs[r] = cx.Dispatch(ctx, &in, &out); errs[r] != nil {
							return
						}
						cin := a2a.CombineInput{Y: make([]byte, l.OutputRows*l.CombineBytes)}
						cout := a2a.CombineOutput{Out: make([]byte, 2*l.CombineBytes), Weights: make([]float32, 2*cfg.ExpertsPerToken)}
						errs[r] = cx.Combine(ctx, &cin, &cout)
					}()
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil && strings.Contains(err.Error(), "scope: ") {
						if !errors.Is(err, cudabackend.ErrKernel) {
							t.Errorf("a failed launch is not an ErrKernel: %v", err)
						}
						found = err.Error()
						break
					}
				}
				if err := errors.Join(errs...); found == "" && err != nil {
					t.Fatalf("iteration %d failed without a scope report: %v", it, err)
				}
			}
			if found == "" {
				t.Fatal("weakened scope not reported in 8 iterations")
			}
			for _, w := range c.want {
				if !strings.Contains(found, w) {
					t.Fatalf("report lacks %q: %s", w, found)
				}
			}
			t.Logf("reported: %s", found)
		})
	}
}
