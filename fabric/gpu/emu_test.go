package gpu_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/cuda/emu"
	"github.com/ferryrdma/ferry/fabric/gpu"
)

// emuKernels builds KernelSource for the CPU emulator (cuda/emu):
// the same gpu.cu the GPU tests compile with NVRTC.
func emuKernels(t *testing.T) *emu.Module {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m, err := emu.Build(ctx, emu.BuildSpec{Sources: []cuda.Source{gpu.KernelSource()}})
	if errors.Is(err, emu.ErrNotSupported) {
		testutil.Skip(t, "cudaemu", "CPU emulator not available here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// A watcher fed by a kernel: ferry_gpu_slot_add on the emulator bumps a
// host slot, in lockstep (every value seen by the callback) and then
// free-running (the last value seen).
func TestEmuWatcherFedByKernel(t *testing.T) {
	m := emuKernels(t)
	add, err := m.Kernel(gpu.KernelSlotAdd)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := newWatcher(t, 4, gpu.WatcherConfig{})
	seen := make(chan uint64, 1024)
	slot, err := w.Acquire(func(old, v uint64) bool { seen <- v; return true })
	if err != nil {
		t.Fatal(err)
	}
	defer slot.Release()
	s := emu.NewStream()
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	launch := func() {
		if err := s.Launch(add, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, slot.DevicePtr(), uint64(1)); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(1); i <= 20; i++ {
		launch()
		if err := s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case v := <-seen:
			if v != i {
				t.Fatalf("watcher saw %d, want %d", v, i)
			}
		case <-ctx.Done():
			t.Fatalf("watcher never saw %d", i)
		}
	}
	for i := 0; i < 50; i++ {
		launch()
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case v := <-seen:
			if v == 70 {
				return
			}
		case <-ctx.Done():
			t.Fatalf("watcher never saw 70 (slot %d)", slot.Word().Load())
		}
	}
}
