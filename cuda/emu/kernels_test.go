package emu_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/cuda/emu"
)

// A block spins on a flag the host raises, then releases a value to
// another block spinning on it.
func TestFlagRelay(t *testing.T) {
	m := emuModule(t)
	mem := alloc(t, 4096)
	s := emu.NewStream()
	defer s.Close()
	if err := s.Launch(kernel(t, m, "flag_relay"), cuda.Dim3{X: 2}, cuda.Dim3{X: 64}, 0,
		mem.Ptr(0), mem.Ptr(64), mem.Ptr(128), mem.Ptr(192), uint64(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the kernel spins meanwhile
	if mem.Uint32(48).Load() != 0 {
		t.Fatal("result written before the host raised the flag")
	}
	mem.Uint32(0).Store(1)
	if err := syncStream(t, s, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := mem.Uint32(48).Load(); got != statusOK {
		t.Fatalf("status %#x", got)
	}
}

func TestGridSync(t *testing.T) {
	m := emuModule(t)
	const blocks = 6
	mem := alloc(t, 4096)
	s := emu.NewStream()
	defer s.Close()
	k := kernel(t, m, "grid_sync_twice")
	for round := 0; round < 3; round++ { // no host reset between rounds
		if err := s.Launch(k, cuda.Dim3{X: blocks}, cuda.Dim3{X: 128}, 0, mem.Ptr(0), mem.Ptr(64), mem.Ptr(128)); err != nil {
			t.Fatal(err)
		}
		if err := syncStream(t, s, time.Minute); err != nil {
			t.Fatal(err)
		}
		for b := 0; b < blocks; b++ {
			if got := mem.Uint32(32 + b).Load(); got != uint32((b+1)%blocks+1) {
				t.Fatalf("round %d block %d saw %d", round, b, got)
			}
		}
		if gen := mem.Uint32(1).Load(); gen != uint32(2*(round+1)) || mem.Uint32(0).Load() != 0 {
			t.Fatalf("barrier state after round %d: arrived %d generation %d", round, mem.Uint32(0).Load(), gen)
		}
	}
}

func TestWarpOps(t *testing.T) {
	m := emuModule(t)
	const threads = 80 // two full warps and a partial one
	mem := alloc(t, 4*16*96)
	s := emu.NewStream()
	defer s.Close()
	if err := s.Launch(kernel(t, m, "warp_ops"), cuda.Dim3{X: 1}, cuda.Dim3{X: threads}, 0, mem.Ptr(0)); err != nil {
		t.Fatal(err)
	}
	if err := syncStream(t, s, time.Minute); err != nil {
		t.Fatal(err)
	}
	for tid := 0; tid < threads; tid++ {
		w, lane := tid/32*32, tid%32
		width := min(32, threads-w) // lanes present in this warp
		o := func(i int) uint32 { return mem.Uint32(tid*16 + i).Load() }
		want := map[int]uint32{0: uint32(w+5) * 3, 3: uint32(tid ^ 1), 13: 1}
		if lane >= 3 {
			want[1] = uint32(tid - 3)
		} else {
			want[1] = uint32(tid)
		}
		if lane%16+4 < 16 {
			want[2] = uint32(tid + 4)
		} else {
			want[2] = uint32(tid)
		}
		var ballot, sum, maxv uint32
		minv := int32(1 << 30)
		all := uint32(1)
		for l := 0; l < width; l++ {
			if l&1 == 1 {
				ballot |= 1 << l
			}
			sum += uint32(l)
			maxv = max(maxv, uint32(l*7%32))
			minv = min(minv, int32(l-5))
			if l >= 31 {
				all = 0
			}
		}
		want[4], want[7], want[8], want[9], want[6] = ballot, sum, maxv, uint32(minv), all
		if width > 7 {
			want[5] = 1
		} else {
			want[5] = 0
		}
		want[10] = 2*4 + uint32(min(4, threads-64)) // lanes < 4 over the block
		if lane == 4 {
			want[11] = 1
		} else {
			want[11] = 0
		}
		if lane < 16 {
			want[12] = 115
		} else {
			want[12] = 216
		}
		for i, v := range want {
			if w == 64 && (i == 0 || i == 12) {
				continue // reads from lanes past the partial warp's end
			}
			if got := o(i); got != v {
				t.Errorf("thread %d op %d: %d, want %d", tid, i, got, v)
			}
		}
	}
}

// Kernel bugs become errors naming them, not hangs.
func TestKernelBugsReported(t *testing.T) {
	m := emuModule(t)
	mem := alloc(t, 4096)
	s := emu.NewStream()
	defer s.Close()
	for _, c := range []struct {
		kernel, want string
		threads      uint32
	}{
		{"bad_exit", "exited", 32},
		{"bad_barrier", "deadlock", 64},
		{"divergent_barrier", "divergent barrier", 64},
		{"exit_then_barrier", "divergent barrier", 64},
	} {
		if err := s.Launch(kernel(t, m, c.kernel), cuda.Dim3{X: 1}, cuda.Dim3{X: c.threads}, 0, mem.Ptr(0)); err != nil {
			t.Fatal(err)
		}
		err := syncStream(t, s, time.Minute)
		var ke *emu.KernelError
		if !errors.As(err, &ke) || !errors.Is(err, emu.ErrKernelFailed) || !strings.Contains(ke.Msg, c.want) {
			t.Fatalf("%s: %v", c.kernel, err)
		}
	}
	// A kernel waiting for ever ends when Sync's context does, and the
	// stream stays usable.
	if err := s.Launch(kernel(t, m, "spin_forever"), cuda.Dim3{X: 2}, cuda.Dim3{X: 32}, 0, mem.Ptr(0)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Sync(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("spin_forever: %v", err)
	}
	if err := s.Launch(kernel(t, m, "grid_sync_twice"), cuda.Dim3{X: 2}, cuda.Dim3{X: 32}, 0, mem.Ptr(1024), mem.Ptr(1088), mem.Ptr(1152)); err != nil {
		t.Fatal(err)
	}
	if err := syncStream(t, s, time.Minute); err != nil {
		t.Fatalf("after an abort: %v", err)
	}
}

func TestLaunchRefused(t *testing.T) {
	m := emuModule(t)
	s := emu.NewStream()
	defer s.Close()
	k := kernel(t, m, "warp_ops")
	if k.MaxThreads() != 256 || len(k.ParamSizes()) != 1 {
		t.Fatalf("warp_ops: bounds %d params %v", k.MaxThreads(), k.ParamSizes())
	}
	type pod struct{ A, B, C uint32 } // 12 bytes for an 8-byte parameter
	for name, launch := range map[string]func() error{
		"over bounds":   func() error { return s.Launch(k, cuda.Dim3{X: 1}, cuda.Dim3{X: 512}, 0, uintptr(0)) },
		"arg count":     func() error { return s.Launch(k, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0) },
		"arg size":      func() error { return s.Launch(k, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, uint32(0)) },
		"arg type":      func() error { return s.Launch(k, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, "x") },
		"struct size":   func() error { return s.Launch(k, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, pod{}) },
		"too many blks": func() error { return s.Launch(k, cuda.Dim3{X: 5000}, cuda.Dim3{X: 32}, 0, uintptr(0)) },
	} {
		if err := launch(); !errors.Is(err, emu.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := m.Kernel("nope"); !errors.Is(err, emu.ErrInvalidArgument) {
		t.Errorf("unknown kernel: %v", err)
	}
}

// TestChaosFindsPerThreadAbort: a decision read per thread from memory
// another block writes, guarding a barrier, is found by chaos mode as a
// divergent barrier within a few seeds; the same decision made
// block-uniform (__syncthreads_or) passes every seed.
func TestChaosFindsPerThreadAbort(t *testing.T) {
	m := emuModule(t)
	mem := alloc(t, 4096)
	s := emu.NewStream()
	defer s.Close()
	k := kernel(t, m, "flag_race")
	run := func(seed int, uniform uint32) error {
		t.Setenv(emu.ChaosEnv, strconv.Itoa(seed))
		mem.Uint32(0).Store(0)
		if err := s.Launch(k, cuda.Dim3{X: 2}, cuda.Dim3{X: 64}, 0, mem.Ptr(0), mem.Ptr(64), uniform); err != nil {
			t.Fatal(err)
		}
		return syncStream(t, s, time.Minute)
	}
	const seeds = 40
	found := 0
	for seed := 1; seed <= seeds && found == 0; seed++ {
		if err := run(seed, 0); err != nil {
			var ke *emu.KernelError
			if !errors.As(err, &ke) || !strings.Contains(ke.Msg, "divergent barrier") {
				t.Fatalf("seed %d: %v, want a divergent barrier", seed, err)
			}
			t.Logf("seed %d, per-thread decision: %v", seed, err)
			found++
		}
	}
	if found == 0 {
		t.Fatalf("%d chaos seeds never split the block at a per-thread decision", seeds)
	}
	for seed := 1; seed <= 10; seed++ {
		if err := run(seed, 1); err != nil {
			t.Fatalf("seed %d, block-uniform decision: %v", seed, err)
		}
	}
}
