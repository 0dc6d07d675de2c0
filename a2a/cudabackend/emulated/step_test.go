package emulated_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/cudabackend/emulated"
	"github.com/ferryrdma/ferry/a2a/cudabackend/onedevice"
	"github.com/ferryrdma/ferry/a2a/workload"
	cu "github.com/ferryrdma/ferry/cuda"
)

// stepConfig carries every path class: two domains of two ranks, two
// NICs, fp8 tokens with scales, a window small enough to overflow.
var stepConfig = a2a.Config{WorldSize: 4, NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 9, Hidden: 48, Scales: 4,
	DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 10, ExpertsPerToken: 3, PrivateTokens: 2}

func newStepWorld(t *testing.T, cfg a2a.Config, o onedevice.Options) *onedevice.World {
	t.Helper()
	requireGxx(t)
	o.Device = emulated.NewDevice()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w, err := onedevice.New(ctx, cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return w
}

// TestStepsLockStepAndConcurrent runs the device-level launches: every
// rank's phase N before phase N+1 (how W ranks share one GPU safely),
// then a goroutine and a stream per rank, all kernels resident together.
func TestStepsLockStepAndConcurrent(t *testing.T) {
	w := newStepWorld(t, stepConfig, onedevice.Options{})
	ctx := context.Background()
	for _, r := range []struct {
		mode  onedevice.Mode
		seed  uint64
		iters int
	}{{onedevice.LockStep, 1, 3}, {onedevice.Concurrent, 2, 3}, {onedevice.LockStep, 3, 1}} {
		if err := w.Iterate(ctx, r.mode, r.seed, r.iters); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStepsReplay runs one recorded set of launches again and again, the
// way a CUDA graph is replayed: the host writes only data (and the token
// count, read by the kernels from device memory) between replays. A CUDA
// graph itself needs a GPU, and says so.
func TestStepsReplay(t *testing.T) {
	cfg := stepConfig
	cfg.ReplicaSize = 2 // replicas across domains too
	w := newStepWorld(t, cfg, onedevice.Options{Backend: cudabackend.Options{Grid: 3, Block: 32}})
	ctx := context.Background()
	if err := w.Replay(ctx, &onedevice.Requeue{}, onedevice.ReplayOptions{Seed: 7, Replays: 12, Accumulate: true}); err != nil {
		t.Fatal(err)
	}
	err := w.Replay(ctx, &onedevice.Graph{}, onedevice.ReplayOptions{Seed: 8, Replays: 1})
	if !errors.Is(err, cu.ErrNotSupported) || !strings.Contains(err.Error(), "graph capture needs a GPU") {
		t.Fatalf("graph on the emulator: %v", err)
	}
}

// TestConcurrentWatchdog: a concurrent step in which one rank never
// launches ends, within the watchdog, with a StepError wrapping the
// kernel's timeout, which names what it awaited.
func TestConcurrentWatchdog(t *testing.T) {
	w := newStepWorld(t, stepConfig, onedevice.Options{Watchdog: 300 * time.Millisecond})
	it, err := workload.NewIteration(rand.New(rand.NewPCG(4, 4)), w.Cfg, &w.L)
	if err != nil {
		t.Fatal(err)
	}
	steps, err := w.Load(it, false)
	if err != nil {
		t.Fatal(err)
	}
	steps[3] = [4]cudabackend.Launch{} // rank 3 withheld
	t0 := time.Now()
	_, _, err = w.Run(context.Background(), onedevice.Concurrent, steps)
	var se *onedevice.StepError
	var ke *cudabackend.KernelError
	if !errors.As(err, &se) || !errors.As(err, &ke) || !errors.Is(err, a2a.ErrTimeout) || se.Rank == 3 {
		t.Fatalf("hung step: %v", err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("the hung step ended after %v", d)
	}
	t.Logf("after %v: %v", time.Since(t0).Round(time.Millisecond), err)
}

// TestRecordPrefetchBatches: one warp in the grid walks every copy of a
// rank, the records of its next eight rows held a batch ahead, through
// many batches of both shares (node and RDMA) in dispatch-recv and
// combine-send.
func TestRecordPrefetchBatches(t *testing.T) {
	cfg := a2a.Config{WorldSize: 4, NVLinkSize: 2, MaxTokens: 24, Hidden: 32, Scales: 2, DispatchType: a2a.FP8,
		CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 4, PrivateTokens: 3}
	w := newStepWorld(t, cfg, onedevice.Options{Backend: cudabackend.Options{Grid: 1, Block: 32}})
	if err := w.Iterate(context.Background(), onedevice.LockStep, 5, 2); err != nil {
		t.Fatal(err)
	}
}
