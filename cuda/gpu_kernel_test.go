package cuda

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"
)

func TestGPUNVRTCCache(t *testing.T) {
	c := requireCUDA(t)
	major, minor, err := NVRTCVersion()
	testutil.SkipIfNotSupported(t, "nvrtc", err)
	dir := t.TempDir()
	src, err := KernelSource("flags.cu")
	check(t, err)
	m1, st1, err := c.CompileModule(src, CompileOptions{CacheDir: dir})
	check(t, err)
	defer m1.Close()
	m2, st2, err := c.CompileModule(src, CompileOptions{CacheDir: dir})
	check(t, err)
	defer m2.Close()
	t.Logf("nvrtc %d.%d: cold compile %v + load %v; cached load %v", major, minor, st1.Compile, st1.Load, st2.Load)
	if st1.CacheHit || m1.FromCache() {
		t.Fatal("first compile hit an empty cache")
	}
	if !st2.CacheHit || !m2.FromCache() || st2.Key != st1.Key {
		t.Fatalf("second compile missed the cache: %+v vs %+v", st2, st1)
	}
	for _, name := range []string{"ferry_flag_wait", "ferry_flag_echo", "ferry_flag_set", "ferry_u64_add"} {
		try(m2.Function(name)).must(t)
	}
	// A different option is a different cache entry.
	m3, st3, err := c.CompileModule(src, CompileOptions{CacheDir: dir, Options: []string{"-DFERRY_TEST=1"}})
	check(t, err)
	m3.Close()
	if st3.CacheHit || st3.Key == st1.Key {
		t.Fatal("options not part of the cache key")
	}
	// Compile errors carry NVRTC's log.
	_, _, err = c.CompileModule(Source{Name: "broken.cu", Code: "extern \"C\" __global__ void k() { undefined_thing(); }"}, CompileOptions{CacheDir: "off"})
	var ce *CompileError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCompile) || !strings.Contains(ce.Log, "undefined_thing") {
		t.Fatalf("compile error: %v", err)
	}
}

func TestGPUCooperativeLaunch(t *testing.T) {
	c := requireCUDA(t)
	info := try(c.Device().Info()).must(t)
	if !info.Cooperative {
		testutil.SkipIfNotSupported(t, "cooperative launch", wrapNotSupported("cooperative launch"))
	}
	mod := testModule(t, c)
	k := try(mod.Function("ferry_test_grid_barrier")).must(t)
	perSM := try(k.MaxActiveBlocksPerSM(128, 0)).must(t)
	blocks := info.SMCount * min(perSM, 2)
	mem := try(c.Alloc(uint64(8 + 4*blocks))).must(t)
	defer mem.Close()
	check(t, mem.Memset(0))
	counter, timeouts, seen := mem.Ptr(), mem.Ptr().Add(4), mem.Ptr().Add(8)
	cfg := LaunchConfig{Grid: Dim3{X: uint32(blocks)}, Block: Dim3{X: 128}, Cooperative: true}
	check(t, k.Launch(cfg, counter, seen, timeouts))
	check(t, c.Synchronize())
	got := make([]byte, 8+4*blocks)
	check(t, mem.CopyToHost(got, 0))
	if n := binary.LittleEndian.Uint32(got[4:]); n != 0 {
		t.Fatalf("%d of %d blocks timed out at the grid barrier", n, blocks)
	}
	for b := 0; b < blocks; b++ {
		if v := binary.LittleEndian.Uint32(got[8+4*b:]); v < uint32(blocks) {
			t.Fatalf("block %d saw %d arrivals, want %d", b, v, blocks)
		}
	}
	t.Logf("cooperative grid of %d blocks (%d SMs x %d) passed its barrier", blocks, info.SMCount, min(perSM, 2))
	// A grid larger than the device can hold at once must be refused.
	big := cfg
	big.Grid.X = uint32(info.SMCount*perSM + 1)
	if err := k.Launch(big, counter, seen, timeouts); err == nil {
		c.Synchronize()
		t.Fatal("oversized cooperative grid accepted")
	}
}

func TestGPUGraphReplay(t *testing.T) {
	c := requireCUDA(t)
	mod := testModule(t, c)
	inc := try(mod.Function("ferry_test_inc")).must(t)
	cnt := try(c.Alloc(8)).must(t)
	defer cnt.Close()
	check(t, cnt.Memset(0))
	st := try(c.NewStream(true)).must(t)
	defer st.Close()
	g, err := st.Capture(CaptureGlobal, func(s *Stream) error {
		return inc.Launch(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 32}, Stream: s}, cnt.Ptr())
	})
	check(t, err)
	defer g.Close()
	ge := try(g.Instantiate()).must(t)
	defer ge.Close()
	const replays = 1000
	start := time.Now()
	for i := 0; i < replays; i++ {
		check(t, ge.Launch(st))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	check(t, st.SynchronizeContext(ctx))
	t.Logf("%d graph replays in %v (%v each)", replays, time.Since(start), time.Since(start)/replays)
	got := make([]byte, 8)
	check(t, cnt.CopyToHost(got, 0))
	if v := binary.LittleEndian.Uint64(got); v != replays {
		t.Fatalf("counter %d after %d replays", v, replays)
	}
	// An error inside the capture ends it and is returned.
	boom := errors.New("boom")
	if _, err := st.Capture(CaptureGlobal, func(*Stream) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("capture error: %v", err)
	}
	check(t, st.Synchronize()) // the stream is usable after a failed capture
}

func flagKinds(t *testing.T) []FlagKind {
	kinds := []FlagKind{FlagHostMapped}
	if err := GDRAvailable(); err == nil {
		kinds = append(kinds, FlagGDR)
	} else {
		t.Logf("GDRCopy flags not tested: %v", err)
	}
	return kinds
}

func TestGPUFlagSpin(t *testing.T) {
	c := requireCUDA(t)
	mod := flagsModule(t, c)
	wait := try(mod.Function("ferry_flag_wait")).must(t)
	for _, kind := range flagKinds(t) {
		t.Run(kind.String(), func(t *testing.T) {
			flags := try(c.NewFlags(4, kind)).must(t)
			defer flags.Close()
			if flags.Kind() != kind {
				t.Fatalf("kind %v", flags.Kind())
			}
			status := try(c.AllocHost(4096, HostPortable|HostMapped)).must(t)
			defer status.Close()
			st := try(c.NewStream(true)).must(t)
			defer st.Close()
			f := flags.Flag(2)
			check(t, wait.Launch(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 32}, Stream: st},
				f.DevicePtr(), uint32(7), uint64(20e9), try(status.DevicePtr()).must(t)))
			time.Sleep(20 * time.Millisecond)
			if v := status.Uint32(0).Load(); v != 0 {
				t.Fatalf("kernel finished (status %d) before the flag was set", v)
			}
			f.Set(7)
			if f.Load() != 7 {
				t.Fatal("flag readback")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			check(t, st.SynchronizeContext(ctx))
			if v := status.Uint32(0).Load(); v != 1 {
				t.Fatalf("kernel status %d, want 1 (released by the host)", v)
			}
		})
	}
}

func TestGPUWatcherBump(t *testing.T) {
	c := requireCUDA(t)
	mod := flagsModule(t, c)
	add := try(mod.Function("ferry_u64_add")).must(t)
	slots := try(c.AllocHost(4096, HostPortable|HostMapped)).must(t)
	defer slots.Close()
	slot := slots.Uint64(5)
	dp := try(slots.DevicePtr()).must(t).Add(5 * 8)
	st := try(c.NewStream(true)).must(t)
	defer st.Close()
	cfg := LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 32}, Stream: st}

	// A watcher-style CPU poll sees the kernel's write without any sync.
	check(t, add.Launch(cfg, dp, uint64(5)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check(t, pollUntil(ctx, "watch", func() (bool, error) { return slot.Load() == 5, nil }))

	// The same from graph replays.
	g, err := st.Capture(CaptureGlobal, func(s *Stream) error { return add.Launch(cfg, dp, uint64(1)) })
	check(t, err)
	defer g.Close()
	ge := try(g.Instantiate()).must(t)
	defer ge.Close()
	for i := 0; i < 10; i++ {
		check(t, ge.Launch(st))
	}
	check(t, st.SynchronizeContext(ctx))
	if v := slot.Load(); v != 15 {
		t.Fatalf("slot %d after 5 + 10 replays", v)
	}
	if slots.Uint64(4).Load() != 0 || slots.Uint64(6).Load() != 0 {
		t.Fatal("neighbouring slots changed")
	}
}
