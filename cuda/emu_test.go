package cuda_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/cuda/emu"
)

// The package's kernels run on the CPU emulator (cuda/emu): the
// same flags.cu and test kernels the GPU tests compile with NVRTC.

func emuBuild(t *testing.T, src cuda.Source) *emu.Module {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m, err := emu.Build(ctx, emu.BuildSpec{Sources: []cuda.Source{src}})
	if errors.Is(err, emu.ErrNotSupported) {
		testutil.Skip(t, "cudaemu", "CPU emulator not available here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func emuRun(t *testing.T, m *emu.Module, s *emu.Stream, name string, grid, block uint32, args ...any) {
	t.Helper()
	k, err := m.Kernel(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Launch(k, cuda.Dim3{X: grid}, cuda.Dim3{X: block}, 0, args...); err != nil {
		t.Fatal(err)
	}
}

func emuSync(t *testing.T, s *emu.Stream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

func emuAlloc(t *testing.T, n int) *emu.Memory {
	m, err := emu.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Free() })
	return m
}

// flags.cu: a kernel spinning on a flag the host raises later, a ping-pong
// with the host, a kernel raising a flag, and the watcher slot add.
func TestEmuFlagKernels(t *testing.T) {
	src, err := cuda.KernelSource("flags.cu")
	if err != nil {
		t.Fatal(err)
	}
	m := emuBuild(t, src)
	mem := emuAlloc(t, 4096)
	s := emu.NewStream()
	defer s.Close()
	const second = uint64(time.Second)

	flag, status := mem.Uint32(0), mem.Uint32(16)
	emuRun(t, m, s, "ferry_flag_wait", 1, 32, mem.Ptr(0), uint32(9), 20*second, mem.Ptr(64))
	time.Sleep(10 * time.Millisecond)
	if status.Load() != 0 {
		t.Fatal("ferry_flag_wait finished before the flag was raised")
	}
	flag.Store(9)
	emuSync(t, s)
	if status.Load() != 1 { // FD_STATUS_OK
		t.Fatalf("ferry_flag_wait status %d", status.Load())
	}
	// A flag that never comes: the kernel's own timeout ends it.
	emuRun(t, m, s, "ferry_flag_wait", 1, 32, mem.Ptr(0), uint32(10), uint64(20*time.Millisecond), mem.Ptr(64))
	emuSync(t, s)
	if status.Load() != 2 { // FD_STATUS_TIMEOUT
		t.Fatalf("ferry_flag_wait timeout status %d", status.Load())
	}

	in, out := mem.Uint32(32), mem.Uint32(48)
	const pings = 50
	emuRun(t, m, s, "ferry_flag_echo", 1, 32, mem.Ptr(128), mem.Ptr(192), uint32(pings), 20*second)
	start := time.Now()
	for i := uint32(1); i <= pings; i++ {
		in.Store(i)
		for out.Load() != i {
			if time.Since(start) > time.Minute {
				t.Fatalf("no echo of ping %d", i)
			}
			time.Sleep(10 * time.Microsecond)
		}
	}
	emuSync(t, s)
	t.Logf("%d host/kernel round trips on the emulator: %v each", pings, time.Since(start)/pings)

	emuRun(t, m, s, "ferry_flag_set", 1, 32, mem.Ptr(256), uint32(77))
	for i := 0; i < 3; i++ {
		emuRun(t, m, s, "ferry_u64_add", 1, 32, mem.Ptr(512), uint64(5))
	}
	emuSync(t, s)
	if mem.Uint32(64).Load() != 77 || mem.Uint64(64).Load() != 15 {
		t.Fatalf("flag_set %d, u64_add %d", mem.Uint32(64).Load(), mem.Uint64(64).Load())
	}
}

// The GPU tests' kernels: fill, a cooperative grid barrier (the emulator
// keeps every block resident), and graph-replay's increment.
func TestEmuTestKernels(t *testing.T) {
	code, err := os.ReadFile("testdata/test_kernels.cu")
	if err != nil {
		t.Fatal(err)
	}
	m := emuBuild(t, cuda.Source{Name: "test_kernels.cu", Code: string(code)})
	const n = 10000
	mem := emuAlloc(t, 4*n+4096)
	s := emu.NewStream()
	defer s.Close()
	emuRun(t, m, s, "ferry_test_fill", 4, 256, mem.Ptr(4096), uint64(n), uint32(0xabcd))
	const blocks = 6
	emuRun(t, m, s, "ferry_test_grid_barrier", blocks, 128, mem.Ptr(0), mem.Ptr(64), mem.Ptr(4))
	for i := 0; i < 5; i++ {
		emuRun(t, m, s, "ferry_test_inc", 1, 32, mem.Ptr(2048))
	}
	emuSync(t, s)
	for i := 0; i < n; i++ {
		if got, want := mem.Uint32(1024+i).Load(), uint32(0xabcd)^(uint32(i)*2654435761); got != want {
			t.Fatalf("fill[%d] = %#x, want %#x", i, got, want)
		}
	}
	if mem.Uint32(1).Load() != 0 {
		t.Fatalf("%d blocks timed out at the grid barrier", mem.Uint32(1).Load())
	}
	for b := 0; b < blocks; b++ {
		if v := mem.Uint32(16 + b).Load(); v < blocks {
			t.Fatalf("block %d saw %d arrivals", b, v)
		}
	}
	if c := mem.Uint64(256).Load(); c != 5 {
		t.Fatalf("inc count %d", c)
	}
}
