package gpu_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/gpu"
	_ "github.com/ferryrdma/ferry/memfabric"
)

// Tests named TestGPU* need a CUDA device and NVRTC; elsewhere they skip
// with the reason (FERRY_TEST_REQUIRE=cuda makes that a failure).

// try(f()).must(t) unwraps a (value, error) pair, failing t on error.
func try[T any](v T, err error) result[T] { return result[T]{v, err} }

type result[T any] struct {
	v   T
	err error
}

func (r result[T]) must(t testing.TB) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func loadKernels(t testing.TB, c *cuda.Context) *cuda.Module {
	t.Helper()
	_, _, err := cuda.NVRTCVersion()
	testutil.SkipIfNotSupported(t, "nvrtc", err)
	m := try(gpu.LoadKernels(c)).must(t)
	t.Cleanup(func() { m.Close() })
	return m
}

func one(st *cuda.Stream) cuda.LaunchConfig {
	return cuda.LaunchConfig{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 32}, Stream: st}
}

// A kernel bumps a watcher slot: plainly, then from a graph replayed 100
// times in lockstep (every value seen), then 100 replays free-running (the
// changes chain and end at the last value).
func TestGPUWatcherKernel(t *testing.T) {
	c := requireCUDA(t)
	mod := loadKernels(t, c)
	add := try(mod.Function(gpu.KernelSlotAdd)).must(t)
	w := try(gpu.NewCUDAWatcher(c, gpu.WatcherConfig{})).must(t)
	defer func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	}()
	ch := make(chan change, 1024)
	slot := try(w.Acquire(func(old, new uint64) bool { ch <- change{old, new}; return true })).must(t)
	st := try(c.NewStream(true)).must(t)
	defer st.Close()

	var lat time.Duration
	for i := uint64(1); i <= 100; i++ {
		t0 := time.Now()
		if err := add.Launch(one(st), slot.DevicePtr(), uint64(1)); err != nil {
			t.Fatal(err)
		}
		got := waitFor(t, ch, 10*time.Second, func(change) bool { return true })
		lat += time.Since(t0)
		if got != (change{i - 1, i}) {
			t.Fatalf("launch %d: %d -> %d", i, got.old, got.new)
		}
	}
	t.Logf("launch to callback: %v on average over 100 plain launches", lat/100)

	g := try(st.Capture(cuda.CaptureGlobal, func(s *cuda.Stream) error {
		return add.Launch(one(s), slot.DevicePtr(), uint64(1))
	})).must(t)
	defer g.Close()
	ge := try(g.Instantiate()).must(t)
	defer ge.Close()
	lat = 0
	for i := uint64(101); i <= 200; i++ {
		t0 := time.Now()
		if err := ge.Launch(st); err != nil {
			t.Fatal(err)
		}
		got := waitFor(t, ch, 10*time.Second, func(change) bool { return true })
		lat += time.Since(t0)
		if got != (change{i - 1, i}) {
			t.Fatalf("replay %d: %d -> %d", i-100, got.old, got.new)
		}
	}
	t.Logf("graph launch to callback: %v on average over 100 replays", lat/100)

	for i := 0; i < 100; i++ {
		if err := ge.Launch(st); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.SynchronizeContext(ctx); err != nil {
		t.Fatal(err)
	}
	prev := uint64(200)
	for prev != 300 {
		got := waitFor(t, ch, 10*time.Second, func(change) bool { return true })
		if got.old != prev || got.new <= got.old || got.new > 300 {
			t.Fatalf("free-running: %d -> %d after %d", got.old, got.new, prev)
		}
		prev = got.new
	}
	if err := slot.Release(); err != nil {
		t.Fatal(err)
	}
}

// A kernel spins on a GPU flag that the engine raises when the immediates
// of a round have arrived (engines on the in-process "mem" provider, whose
// immediates need no GPU registration): a plain launch waiting for an
// epoch from Arm, then a wait captured once in a graph and replayed for 20
// rounds, then a wait that must time out.
func TestGPUFlagCounterReleasesKernel(t *testing.T) {
	c := requireCUDA(t)
	mod := loadKernels(t, c)
	waitValue := try(mod.Function(gpu.KernelWaitValue)).must(t)
	waitEpoch := try(mod.Function(gpu.KernelWaitEpoch)).must(t)
	kinds := []cuda.FlagKind{cuda.FlagHostMapped}
	if err := cuda.GDRAvailable(); err == nil {
		kinds = append(kinds, cuda.FlagGDR)
	} else {
		t.Logf("GDRCopy flags not tested: %v", err)
	}
	for _, kind := range kinds {
		t.Run(kind.String(), func(t *testing.T) {
			flags := try(c.NewFlags(1, kind)).must(t)
			defer flags.Close()
			// Word 0: status; word 32: the graph waiter's epoch (own cache lines).
			words := try(c.AllocHost(256, cuda.HostMapped|cuda.HostPortable)).must(t)
			defer words.Close()
			wdev := try(words.DevicePtr()).must(t)
			status, epoch := words.Uint32(0), words.Uint32(32)
			statusPtr, epochPtr := wdev, wdev.Add(128)
			st := try(c.NewStream(true)).must(t)
			defer st.Close()

			a, b, dst := memEngines(t)
			const imm = 0x5eed
			fc := try(gpu.NewFlagCounter(b, imm, flags.Flag(0))).must(t)
			timeout := uint64(10 * time.Second)

			// Plain launch: the kernel waits for the epoch Arm returned.
			ep := try(fc.Arm(4)).must(t)
			if err := waitValue.Launch(one(st), fc.Flag().DevicePtr(), ep, timeout, statusPtr); err != nil {
				t.Fatal(err)
			}
			sendImms(t, a, dst, imm, 3)
			time.Sleep(5 * time.Millisecond)
			if s := status.Load(); s != 0 {
				t.Fatalf("kernel finished (status %d) before the last immediate", s)
			}
			t0 := time.Now()
			sendImms(t, a, dst, imm, 1)
			waitStatus(t, status, gpu.StatusOK)
			t.Logf("last immediate to kernel release: %v", time.Since(t0))
			syncStream(t, st)

			// The same captured wait, replayed once per round.
			epoch.Store(fc.Flag().Epoch())
			g := try(st.Capture(cuda.CaptureGlobal, func(s *cuda.Stream) error {
				return waitEpoch.Launch(one(s), fc.Flag().DevicePtr(), epochPtr, timeout, statusPtr)
			})).must(t)
			defer g.Close()
			ge := try(g.Instantiate()).must(t)
			defer ge.Close()
			for round := 0; round < 20; round++ {
				status.Store(0)
				want := try(fc.Arm(3)).must(t)
				if err := ge.Launch(st); err != nil {
					t.Fatal(err)
				}
				sendImms(t, a, dst, imm, 3)
				waitStatus(t, status, gpu.StatusOK)
				syncStream(t, st)
				if e := epoch.Load(); e != want {
					t.Fatalf("round %d: waiter at epoch %d, want %d", round, e, want)
				}
			}

			// Nobody arms: the wait times out with a status, not a hang.
			status.Store(0)
			if err := waitValue.Launch(one(st), fc.Flag().DevicePtr(), fc.Flag().Epoch()+1, uint64(time.Millisecond), statusPtr); err != nil {
				t.Fatal(err)
			}
			syncStream(t, st)
			if s := status.Load(); s != gpu.StatusTimeout {
				t.Fatalf("status %d, want timeout", s)
			}
			b.RemoveImmCount(imm)
		})
	}
}

func waitStatus(t testing.TB, status interface{ Load() uint32 }, want uint32) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for status.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("kernel status %d, want %d", status.Load(), want)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

func syncStream(t testing.TB, st *cuda.Stream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := st.SynchronizeContext(ctx); err != nil {
		t.Fatal(err)
	}
}

// memEngines opens two engines on the "mem" provider and a region of b
// that a writes its immediates to.
func memEngines(t testing.TB) (a, b *fabric.Engine, dst fabric.Descriptor) {
	t.Helper()
	open := func() *fabric.Engine {
		e := try(fabric.Open(context.Background(), fabric.Config{Transport: "mem", Logger: quiet})).must(t)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := e.Close(ctx); err != nil {
				t.Error(err)
			}
		})
		return e
	}
	a, b = open(), open()
	buf := try(fabric.AllocHost(4096)).must(t)
	t.Cleanup(func() { _ = buf.Free() })
	r := try(b.RegisterHost(buf, fabric.AccessRemoteWrite)).must(t)
	return a, b, try(r.Descriptor()).must(t)
}

func sendImms(t testing.TB, a *fabric.Engine, dst fabric.Descriptor, imm uint32, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		tr := fabric.NewTransfer()
		if err := a.SubmitImm(fabric.ImmWrite{Imm: imm, Dst: dst}, fabric.Notify(tr)); err != nil {
			t.Fatal(err)
		}
		if err := tr.Wait(ctx); err != nil {
			t.Fatal(fmt.Errorf("imm %d of %d: %w", i+1, n, err))
		}
	}
}

// BenchmarkGPUWatcher: one graph replay bumps a slot; the op ends when the
// watcher's callback has seen the new value.
func BenchmarkGPUWatcher(b *testing.B) {
	for _, mode := range []fabric.PollMode{fabric.PollSpin, fabric.PollAdaptive} {
		b.Run(mode.String(), func(b *testing.B) {
			c := requireCUDA(b)
			mod := loadKernels(b, c)
			add := try(mod.Function(gpu.KernelSlotAdd)).must(b)
			w := try(gpu.NewCUDAWatcher(c, gpu.WatcherConfig{Poll: mode})).must(b)
			defer w.Close()
			var seen atomic.Uint64
			slot := try(w.Acquire(func(old, new uint64) bool { seen.Store(new); return true })).must(b)
			st := try(c.NewStream(true)).must(b)
			defer st.Close()
			g := try(st.Capture(cuda.CaptureGlobal, func(s *cuda.Stream) error {
				return add.Launch(one(s), slot.DevicePtr(), uint64(1))
			})).must(b)
			defer g.Close()
			ge := try(g.Instantiate()).must(b)
			defer ge.Close()
			v := uint64(0)
			for b.Loop() {
				v++
				if err := ge.Launch(st); err != nil {
					b.Fatal(err)
				}
				spinUntil(b, func() bool { return seen.Load() == v })
			}
			syncStream(b, st)
		})
	}
}

// BenchmarkGPUFlagWake: a kernel waits on a FlagCounter's epoch; the op is
// launch, arm, one immediate over the mem provider, and the kernel's
// status seen by the host.
func BenchmarkGPUFlagWake(b *testing.B) {
	c := requireCUDA(b)
	mod := loadKernels(b, c)
	waitValue := try(mod.Function(gpu.KernelWaitValue)).must(b)
	flags := try(c.NewFlags(1, cuda.FlagAuto)).must(b)
	defer flags.Close()
	words := try(c.AllocHost(128, cuda.HostMapped|cuda.HostPortable)).must(b)
	defer words.Close()
	statusPtr := try(words.DevicePtr()).must(b)
	status := words.Uint32(0)
	st := try(c.NewStream(true)).must(b)
	defer st.Close()
	a, e, dst := memEngines(b)
	const imm = 0xbe
	fc := try(gpu.NewFlagCounter(e, imm, flags.Flag(0))).must(b)
	defer e.RemoveImmCount(imm)
	b.Logf("flag kind %v", flags.Kind())
	for b.Loop() {
		status.Store(0)
		ep := try(fc.Arm(1)).must(b)
		if err := waitValue.Launch(one(st), fc.Flag().DevicePtr(), ep, uint64(10*time.Second), statusPtr); err != nil {
			b.Fatal(err)
		}
		if err := a.SubmitImm(fabric.ImmWrite{Imm: imm, Dst: dst}, fabric.Completion{}); err != nil {
			b.Fatal(err)
		}
		spinUntil(b, func() bool { return status.Load() != 0 })
		if s := status.Load(); s != gpu.StatusOK {
			b.Fatalf("status %d", s)
		}
	}
	syncStream(b, st)
}

// spinUntil spins on cond, failing after 10 s.
func spinUntil(b testing.TB, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; !cond(); i++ {
		if i%(1<<14) == 0 && time.Now().After(deadline) {
			b.Fatal("condition not met within 10 s")
		}
	}
}
