package gpu

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/cuda/emu"
)

// emuFlagStore is a Flag's word in emulator memory, which kernels on the
// emulator read through its address.
type emuFlagStore struct{ w *atomic.Uint32 }

func (f emuFlagStore) Set(v uint32) { f.w.Store(v) }
func (f emuFlagStore) Load() uint32 { return f.w.Load() }

// A FlagCounter releasing kernels: the engine's workers raise the flag
// when the immediates arrive (two engines on the in-process mem
// provider); ferry_gpu_wait_value and ferry_gpu_wait_epoch run on the CPU
// emulator, launched before the immediates are sent, for three rounds;
// then a wait that must time out.
func TestEmuFlagCounterReleasesKernel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := emu.Build(ctx, emu.BuildSpec{Sources: []cuda.Source{KernelSource()}})
	if errors.Is(err, emu.ErrNotSupported) {
		testutil.Skip(t, "cudaemu", "CPU emulator not available here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	waitValue, err := m.Kernel(KernelWaitValue)
	if err != nil {
		t.Fatal(err)
	}
	waitEpoch, err := m.Kernel(KernelWaitEpoch)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := emu.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Free()
	fl := &Flag{st: emuFlagStore{mem.Uint32(0)}, dev: cuda.DevicePtr(mem.Ptr(0))}
	a, b, dst := memPair(t)
	fc, err := newFlagCounter(b, 0x51, fl)
	if err != nil {
		t.Fatal(err)
	}
	sv, se := emu.NewStream(), emu.NewStream()
	defer sv.Close()
	defer se.Close()
	timeout := uint64(30 * time.Second)
	for round := uint32(1); round <= 3; round++ {
		want, err := fc.Arm(4)
		if err != nil {
			t.Fatal(err)
		}
		if want != round {
			t.Fatalf("round %d armed epoch %d", round, want)
		}
		if err := sv.Launch(waitValue, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, fl.DevicePtr(), want, timeout, mem.Ptr(64)); err != nil {
			t.Fatal(err)
		}
		if err := se.Launch(waitEpoch, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, fl.DevicePtr(), mem.Ptr(128), timeout, mem.Ptr(192)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
		if mem.Uint32(16).Load() == StatusOK && round == 1 {
			t.Fatal("kernel released before the immediates arrived")
		}
		sendImms(t, a, dst, 0x51, 4)
		for _, s := range []*emu.Stream{sv, se} {
			if err := s.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if v, e, st := mem.Uint32(16).Load(), mem.Uint32(32).Load(), mem.Uint32(48).Load(); v != StatusOK || st != StatusOK || e != round {
			t.Fatalf("round %d: wait_value status %d, wait_epoch status %d epoch %d", round, v, st, e)
		}
		mem.Uint32(16).Store(0)
		mem.Uint32(48).Store(0)
	}
	// Nobody sends the next round: the kernels' own timeout answers.
	want, err := fc.Arm(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Launch(waitValue, cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, fl.DevicePtr(), want, uint64(20*time.Millisecond), mem.Ptr(64)); err != nil {
		t.Fatal(err)
	}
	if err := sv.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if v := mem.Uint32(16).Load(); v != StatusTimeout {
		t.Fatalf("unreleased wait: status %d", v)
	}
}
