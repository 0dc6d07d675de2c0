package emu_test

import (
	"testing"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cuda"
	"github.com/ferryrdma/ferry/a2a/cuda/emu"
	"github.com/ferryrdma/ferry/a2a/cuda/internal/steptest"
)

// stepConfig carries every path class: two domains of two ranks, two
// NICs, fp8 tokens with scales, a window small enough to overflow.
var stepConfig = a2a.Config{WorldSize: 4, NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 9, Hidden: 48, Scales: 4,
	DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 10, ExpertsPerToken: 3, PrivateTokens: 2}

// TestStepsLockStepAndConcurrent runs the device-level launches: every
// rank's phase N before phase N+1 (how W ranks share one GPU safely),
// then a goroutine and a stream per rank, all kernels resident together.
func TestStepsLockStepAndConcurrent(t *testing.T) {
	requireGxx(t)
	w := steptest.NewWorld(t, stepConfig, steptest.Options{Device: emu.NewDevice()})
	w.Iterate(t, steptest.LockStep, 1, 3)
	w.Iterate(t, steptest.Concurrent, 2, 3)
	w.Iterate(t, steptest.LockStep, 3, 1)
}

// TestStepsReplay runs one recorded set of launches again and again, the
// way a CUDA graph is replayed: the host writes only data (and the token
// count, read by the kernels from device memory) between replays.
func TestStepsReplay(t *testing.T) {
	requireGxx(t)
	cfg := stepConfig
	cfg.ReplicaSize = 2 // replicas across domains too
	w := steptest.NewWorld(t, cfg, steptest.Options{Device: emu.NewDevice(), Backend: cuda.Options{Grid: 3, Block: 32}})
	w.Replay(t, &steptest.Requeue{}, 7, 12)
}
