package emu_test

import (
	"testing"
	"time"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/cuda/emu"
)

// Two different modules loaded in one process run side by side. Each
// shared object carries its own runtime: without -fno-gnu-unique, g++
// made the runtime's inline variables (the worker pool) process-wide
// unique symbols, so the second module's kernels ran on the first one's
// fibers and read a thread view that runtime never set (a segfault).
func TestTwoModulesInOneProcess(t *testing.T) {
	a := emuModule(t)
	b := emuModule(t, "FERRY_TEST_SECOND_MODULE=1")
	mem := alloc(t, 4096)
	s := emu.NewStream()
	defer s.Close()
	for round, m := range []*emu.Module{a, b, a, b} {
		if err := s.Launch(kernel(t, m, "grid_sync_twice"), cuda.Dim3{X: 3}, cuda.Dim3{X: 128}, 0,
			mem.Ptr(0), mem.Ptr(64), mem.Ptr(128)); err != nil {
			t.Fatal(err)
		}
		if err := syncStream(t, s, time.Minute); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if gen := mem.Uint32(1).Load(); gen != uint32(2*(round+1)) {
			t.Fatalf("round %d: barrier generation %d", round, gen)
		}
	}
}
