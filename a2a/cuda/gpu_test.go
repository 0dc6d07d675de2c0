package cuda_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	a2acuda "github.com/ferryrdma/ferry/a2a/cuda"
	"github.com/ferryrdma/ferry/a2a/cuda/internal/steptest"
	"github.com/ferryrdma/ferry/cuda"
	_ "github.com/ferryrdma/ferry/fabric/memfabric"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// These tests need a GPU (make gpu-build, then make gpu-test on the GPU
// machine); elsewhere they skip, and FERRY_TEST_REQUIRE=cuda fails them.
// The ranks share one GPU in one process; their transport buffers are
// host memory mapped into the device, which the in-process "mem"
// transport copies by host address (that machine has no RDMA fabric).

func requireDevice(tb testing.TB) *a2acuda.DriverDevice {
	tb.Helper()
	testutil.SkipIfNotSupported(tb, "cuda", cuda.Init())
	dev, err := cuda.GetDevice(0)
	testutil.SkipIfNotSupported(tb, "cuda", err)
	c, err := dev.PrimaryContext()
	if err != nil {
		tb.Fatalf("primary context: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("context close at cleanup (leaked objects?): %v", err)
		}
	})
	d, err := a2acuda.NewDriverDevice(c)
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

// TestGPUEightRanksOneGPU: lock step (one phase of every rank at a time,
// full grids), then concurrent (a stream per rank, grids of SMs/8 blocks
// so that all eight are resident), every iteration equal to the oracle.
func TestGPUEightRanksOneGPU(t *testing.T) {
	d := requireDevice(t)
	grid, _ := d.DefaultLaunch()
	t.Run("lock-step", func(t *testing.T) {
		w := steptest.NewWorld(t, gpuConfig(32), steptest.Options{Device: d, Mapped: true})
		w.Iterate(t, steptest.LockStep, 1, 4)
	})
	t.Run("concurrent", func(t *testing.T) {
		w := steptest.NewWorld(t, gpuConfig(32), steptest.Options{Device: d, Mapped: true,
			Backend: a2acuda.Options{Grid: max(grid/8, 1), Timeout: 20 * time.Second}})
		w.Iterate(t, steptest.Concurrent, 2, 4)
	})
}

// graphReplay captures every rank's four launches, in lock step, on one
// stream into a CUDA graph once, and launches the graph per replay.
type graphReplay struct {
	st   *cuda.Stream
	exec *cuda.GraphExec
}

func (g *graphReplay) Record(tb testing.TB, w *steptest.World, steps [][4]a2acuda.Launch) {
	tb.Helper()
	st, ok := w.Backends[0].Stream().(interface{ CUDAStream() *cuda.Stream })
	if !ok {
		tb.Fatal("not a driver stream")
	}
	g.st = st.CUDAStream()
	graph, err := g.st.Capture(cuda.CaptureRelaxed, func(s *cuda.Stream) error {
		for p := a2acuda.PhaseDispatchSend; p <= a2acuda.PhaseCombineRecv; p++ {
			for r := range steps {
				l := steps[r][p]
				cfg := cuda.LaunchConfig{Grid: cuda.Dim3{X: uint32(l.Grid)}, Block: cuda.Dim3{X: uint32(l.Block)},
					Stream: s, Cooperative: true}
				if err := l.Kernel.(*cuda.Function).Launch(cfg, l.Args...); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("capture: %v", err)
	}
	defer graph.Close()
	if g.exec, err = graph.Instantiate(); err != nil {
		tb.Fatalf("instantiate: %v", err)
	}
	tb.Cleanup(func() { _ = g.exec.Close() })
}

func (g *graphReplay) Replay(tb testing.TB, w *steptest.World) {
	tb.Helper()
	if err := g.exec.Launch(g.st); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.st.SynchronizeContext(ctx); err != nil {
		tb.Fatal(err)
	}
	for p := a2acuda.PhaseDispatchSend; p <= a2acuda.PhaseCombineRecv; p++ {
		for r, b := range w.Backends {
			if _, err := b.Status(p); err != nil {
				tb.Fatalf("rank %d: %v", r, err)
			}
		}
	}
}

// TestGPUGraphReplay: one captured graph of a whole step of 8 ranks,
// replayed 1000 times with new data and token counts (in device memory)
// between replays, every replay equal to the oracle.
func TestGPUGraphReplay(t *testing.T) {
	d := requireDevice(t)
	w := steptest.NewWorld(t, gpuConfig(16), steptest.Options{Device: d, Mapped: true})
	w.Replay(t, &graphReplay{}, 3, 1000)
}

// copyBandwidth measures the device's copy bandwidth in bytes read plus
// written per second: a device-to-device copy of 1 GiB, best of three.
func copyBandwidth(b *testing.B, c *cuda.Context) float64 {
	const size = 1 << 30
	src, err := c.Alloc(size)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	dst, err := c.Alloc(size)
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Close()
	best := time.Duration(1 << 62)
	for range 3 {
		t0 := time.Now()
		if err := c.CopyDtoD(dst.Ptr(), src.Ptr(), size); err != nil {
			b.Fatal(err)
		}
		if err := c.Synchronize(); err != nil {
			b.Fatal(err)
		}
		best = min(best, time.Since(t0))
	}
	return 2 * size / best.Seconds()
}

// BenchmarkGPUStep times one rank's iteration on a GPU (every copy to its
// own experts: the kernels' memory traffic alone, no fabric), decode and
// prefill sizes, and reports each phase in µs (host clock around launch
// and sync, so launch overhead included) and the ratio of the measured
// time to the HBM floor: the bytes the kernels must read and write over
// the device's measured copy bandwidth.
func BenchmarkGPUStep(b *testing.B) {
	d := requireDevice(b)
	for _, T := range []int{128, 4096} {
		b.Run(map[int]string{128: "decode", 4096: "prefill"}[T], func(b *testing.B) {
			cfg := a2a.Config{WorldSize: 1, MaxTokens: T, Hidden: 7168, Scales: 56, DispatchType: a2a.FP8,
				CombineType: a2a.BF16, Experts: 256, ExpertsPerToken: 8}
			w := steptest.NewWorld(b, cfg, steptest.Options{Device: d})
			l := &w.L
			bw := copyBandwidth(b, d.Context())
			row := int64(l.TokenBytes + l.ScaleBytes)
			TK := int64(T * l.ExpertsPerToken)
			dispatchBytes := int64(T)*row + 3*TK*row
			combineBytes := 3*TK*int64(l.CombineBytes) + int64(T*l.CombineBytes)
			phases := w.Time(b, b.N)
			floor := float64(dispatchBytes+combineBytes) / bw * 1e6
			total := phases[0] + phases[1] + phases[2] + phases[3]
			b.ReportMetric(phases[0]+phases[1], "dispatch_us")
			b.ReportMetric(phases[2]+phases[3], "combine_us")
			b.ReportMetric(total/floor, "x_hbm_floor")
			b.ReportMetric(bw/1e9, "copy_GBps")
		})
	}
}

// TestGPUNodeProcesses: W ranks as processes on the one GPU, all in one
// NVLink domain, their buffers CUDA VMM allocations exported to each other
// over unix sockets and mapped (a2a/cuda.ProcessNode); the fabric between
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
