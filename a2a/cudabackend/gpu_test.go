package cudabackend_test

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/cudabackend/onedevice"
	"github.com/ferryrdma/ferry/a2a/workload"
	"github.com/ferryrdma/ferry/internal/testutil/cudatest"
	_ "github.com/ferryrdma/ferry/memfabric"
)

// These tests need a GPU (make gpu-build, then make gpu-test on the GPU
// machine); elsewhere they skip, and FERRY_TEST_REQUIRE=cuda fails them.
// The ranks share one GPU in one process; their transport buffers are
// host memory mapped into the device, which the in-process "mem"
// transport copies by host address (that machine has no RDMA fabric).

func requireDevice(tb testing.TB) *cudabackend.DriverDevice {
	tb.Helper()
	d, err := cudabackend.NewDriverDevice(cudatest.Context(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// gpuConfig: 8 ranks in two NVLink domains of 4, fp8 with 56 scales and
// bf16 combine (a specialised shape: hidden 7168, top-8), small windows so
// that every path class is carried.
func gpuConfig(tokens int) a2a.Config {
	return a2a.Config{WorldSize: 8, NVLinkSize: 4, MaxTokens: tokens, Hidden: 7168, Scales: 56, DispatchType: a2a.FP8,
		CombineType: a2a.BF16, Experts: 64, ExpertsPerToken: 8, PrivateTokens: 4}
}

// newWorld builds W ranks on one device for the test.
func newWorld(tb testing.TB, cfg a2a.Config, o onedevice.Options) *onedevice.World {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w, err := onedevice.New(ctx, cfg, o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := w.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return w
}

// TestGPUEightRanksOneGPU: lock step (one phase of every rank at a time,
// full grids), then concurrent (a stream per rank, grids of SMs/8 blocks
// so that all eight are resident), every iteration equal to the oracle.
func TestGPUEightRanksOneGPU(t *testing.T) {
	d := requireDevice(t)
	grid, _ := d.DefaultLaunch()
	ctx := context.Background()
	t.Run("lock-step", func(t *testing.T) {
		w := newWorld(t, gpuConfig(32), onedevice.Options{Device: d, Mapped: true})
		if err := w.Iterate(ctx, onedevice.LockStep, 1, 4); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		w := newWorld(t, gpuConfig(32), onedevice.Options{Device: d, Mapped: true,
			Backend: cudabackend.Options{Grid: max(grid/8, 1)}, Watchdog: 20 * time.Second})
		if err := w.Iterate(ctx, onedevice.Concurrent, 2, 4); err != nil {
			t.Fatal(err)
		}
	})
}

// TestGPUConcurrentContexts: two worlds (two contexts per rank, as two
// micro-batches) on the one GPU at the same time, every rank of both on
// its own stream, with grids sized by the rule of a2a/cudabackend.ResidentDevice
// (all four contexts' grids fit the device together): both complete and
// equal the oracle, so co-resident cooperative kernels of different
// contexts do not starve each other.
func TestGPUConcurrentContexts(t *testing.T) {
	d := requireDevice(t)
	grid, _ := d.DefaultLaunch()
	cfg := a2a.Config{WorldSize: 2, NVLinkSize: 2, MaxTokens: 64, Hidden: 7168, Scales: 56, DispatchType: a2a.FP8,
		CombineType: a2a.BF16, Experts: 16, ExpertsPerToken: 8}
	opt := onedevice.Options{Device: d, Backend: cudabackend.Options{Grid: max(grid/4, 1)}, Watchdog: 20 * time.Second}
	worlds := []*onedevice.World{newWorld(t, cfg, opt), newWorld(t, cfg, opt)}
	errs := make(chan error, len(worlds))
	for i, w := range worlds {
		go func() { errs <- w.Iterate(context.Background(), onedevice.Concurrent, uint64(10+i), 8) }()
	}
	for range worlds {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestGPUGraphReplay: one captured graph of a whole step of 8 ranks,
// replayed 1000 times with new data and token counts (in device memory)
// between replays, every replay equal to the oracle.
func TestGPUGraphReplay(t *testing.T) {
	d := requireDevice(t)
	w := newWorld(t, gpuConfig(16), onedevice.Options{Device: d, Mapped: true})
	g := &onedevice.Graph{}
	defer g.Close()
	if err := w.Replay(context.Background(), g, onedevice.ReplayOptions{Seed: 3, Replays: 1000, Accumulate: true}); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkGPUStep times one rank's iteration on a GPU (every copy to its
// own experts: the kernels' memory traffic alone, no fabric), decode and
// prefill sizes, and reports each phase in µs (host clock around launch
// and sync, so launch overhead included) and the ratio of the measured
// time to the HBM floor: the bytes the kernels must read and write over
// the device's measured copy bandwidth. bench-a2a --mode lockstep reports
// the same for W ranks.
func BenchmarkGPUStep(b *testing.B) {
	d := requireDevice(b)
	ctx := context.Background()
	for _, T := range []int{128, 4096} {
		b.Run(map[int]string{128: "decode", 4096: "prefill"}[T], func(b *testing.B) {
			cfg := a2a.Config{WorldSize: 1, MaxTokens: T, Hidden: 7168, Scales: 56, DispatchType: a2a.FP8,
				CombineType: a2a.BF16, Experts: 256, ExpertsPerToken: 8}
			w := newWorld(b, cfg, onedevice.Options{Device: d})
			bw, err := onedevice.CopyBandwidth(d.Context())
			if err != nil {
				b.Fatal(err)
			}
			it, err := workload.BenchIteration(rand.New(rand.NewPCG(9, 9)), cfg, &w.L, T)
			if err != nil {
				b.Fatal(err)
			}
			steps, err := w.Load(it, false)
			if err != nil {
				b.Fatal(err)
			}
			var sum [4]time.Duration
			for b.Loop() {
				phases, _, err := w.Run(ctx, onedevice.LockStep, steps)
				if err != nil {
					b.Fatal(err)
				}
				for p := range sum {
					sum[p] += phases[p]
				}
			}
			if err := w.Check(it); err != nil {
				b.Fatal(err)
			}
			us := func(p ...int) float64 {
				var d time.Duration
				for _, i := range p {
					d += sum[i]
				}
				return float64(d.Nanoseconds()) / 1e3 / float64(max(b.N, 1))
			}
			floor := float64(onedevice.StepBytes(&w.L, T)) / bw * 1e6
			b.ReportMetric(us(0, 1), "dispatch_us")
			b.ReportMetric(us(2, 3), "combine_us")
			b.ReportMetric(us(0, 1, 2, 3)/floor, "x_hbm_floor")
			b.ReportMetric(bw/1e9, "copy_GBps")
		})
	}
}

// TestGPUNodeProcesses: W ranks as processes on the one GPU, all in one
// NVLink domain, their buffers CUDA VMM allocations exported to each other
// over unix sockets and mapped (a2a/cudabackend.ProcessNode); the fabric between
// them (tcp;ofi_rxm on loopback, or FERRY_A2A_GPU_TRANSPORT) carries only
// the count rows and signals, in host memory. Without MPS the processes'
// contexts time-slice the GPU, so a kernel waiting for a peer's rows
// waits for the peer's slice: slow, never stuck. Every iteration is
// compared with the oracle, buffers poisoned between iterations.
func TestGPUNodeProcesses(t *testing.T) {
	requireDevice(t)
	transport := os.Getenv("FERRY_A2A_GPU_TRANSPORT")
	if transport == "" {
		transport = "tcp;ofi_rxm"
	}
	for name, cfg := range map[string]a2a.Config{
		"W4_S4":    {WorldSize: 4, NVLinkSize: 4},
		"W4_S4_D2": {WorldSize: 4, NVLinkSize: 4, ReplicaSize: 2},
	} {
		t.Run(name, func(t *testing.T) {
			c := gpuConfig(32)
			c.WorldSize, c.NVLinkSize, c.ReplicaSize = cfg.WorldSize, cfg.NVLinkSize, cfg.ReplicaSize
			runProcJob(t, procJob{Config: c, Device: "gpu", Transport: transport, Seed: 21, Iters: 4, Phase: 2 * time.Minute})
		})
	}
}
