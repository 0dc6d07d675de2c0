package cuda

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"
)

// TestFakeDriver runs the whole package against testdata/fakecuda.c, a
// fake libcuda built with the C compiler: loading and symbol resolution,
// the context made current inside each call (the fake refuses calls
// without one, from any thread), argument packing, the allocation property
// layout, the fd conventions of VMM export/import, captures and replays.
// It checks ferry's plumbing, not the real driver's semantics: that is the
// GPU tests' job.
func TestFakeDriver(t *testing.T) {
	if os.Getenv("FERRY_TEST_FAKE_CUDA") == "1" {
		fakeDriverChecks(t)
		return
	}
	if !cgoEnabled {
		t.Skip("built with CGO_ENABLED=0: nothing can be loaded (TestNoDriver covers this build)")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		if cc, err = exec.LookPath("gcc"); err != nil {
			t.Skip("no C compiler to build the fake driver with")
		}
	}
	dir := t.TempDir()
	lib, gdr, nvrtc := filepath.Join(dir, "libcuda.so.1"), filepath.Join(dir, "libgdrapi.so.2"), filepath.Join(dir, "libnvrtc.so.13")
	for out, src := range map[string]string{lib: "testdata/fakecuda.c", gdr: "testdata/fakegdr.c", nvrtc: "testdata/fakenvrtc.c"} {
		if msg, err := exec.Command(cc, "-shared", "-fPIC", "-o", out, src).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", src, err, msg)
		}
	}
	testutil.RunTest(t, "TestFakeDriver", testutil.SpawnOptions{Env: []string{"FERRY_TEST_FAKE_CUDA=1",
		"FERRY_CUDA_DRIVER=" + lib, "FERRY_NVRTC=" + nvrtc, "FERRY_GDRCOPY=" + gdr}})
}

// stat reads one of the fake driver's counters.
func stat(t *testing.T, d Device, which int) int {
	t.Helper()
	return try(d.Attribute(Attribute(9000 + which))).must(t)
}

const (
	statSetCurrent = iota
	statLaunches
	statCoopLaunches
	statLiveAllocs
	statRDMA
	statHandleTypes
	statAccessFlags
	statAccessCount
	statCaptureMode
	statVMMHandles
	statVMMMappings
	statVMMRanges
	statRDMAFlushes
)

func fakeDriverChecks(t *testing.T) {
	gdrdrvPath = "/nonexistent/gdrdrv" // whatever this machine has
	check(t, Init())
	if v := try(DriverVersion()).must(t); v != 13000 {
		t.Fatalf("driver version %d", v)
	}
	if n := try(DeviceCount()).must(t); n != 2 {
		t.Fatalf("device count %d", n)
	}
	d0, d1 := try(GetDevice(0)).must(t), try(GetDevice(1)).must(t)
	info := try(d1.Info()).must(t)
	if info.Name != "Fake GPU B" || info.Major != 9 || info.Arch != "sm_90a" || info.SMCount != 4 ||
		info.PCIBusID != "0000:02:00.0" || info.GPUDirectVMM || !info.VMM {
		t.Fatalf("device info %+v", info)
	}
	c := try(d0.PrimaryContext()).must(t)
	c1 := try(d1.PrimaryContext()).must(t)

	// GPUDirect RDMA flush: device 0 is C2C-attached (host native
	// atomics) and needs it although it is sm_90; device 1 does not.
	if !try(d0.NeedsRDMAFlush()).must(t) || try(d1.NeedsRDMAFlush()).must(t) {
		t.Fatalf("needs flush: device 0 %v, device 1 %v", try(d0.NeedsRDMAFlush()).must(t), try(d1.NeedsRDMAFlush()).must(t))
	}
	check(t, c.FlushGPUDirectRDMAWrites())
	check(t, c.FlushGPUDirectRDMAWrites())
	if n := stat(t, d0, statRDMAFlushes); n != 2 {
		t.Fatalf("%d flushes reached the driver, want 2", n)
	}

	// Memory and copies, from many fresh OS threads: each call must make
	// the context current itself.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // the thread dies with the goroutine
			m, err := c.Alloc(1 << 20)
			if err != nil {
				t.Error(err)
				return
			}
			want := pattern(uint32(i), 1<<20)
			got := make([]byte, 1<<20)
			if err := m.CopyFromHost(0, want); err != nil {
				t.Error(err)
			}
			if err := m.CopyToHost(got, 0); err != nil || string(got) != string(want) {
				t.Errorf("round trip: %v", err)
			}
			if err := m.Close(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if stat(t, d0, statSetCurrent) == 0 {
		t.Fatal("no call made a context current")
	}
	m := try(c.Alloc(4 << 20)).must(t)
	check(t, m.CopyFromHost(0, pattern(7, 4<<20)))
	m2 := try(c.Alloc(4 << 20)).must(t)
	check(t, c.CopyDtoD(m2.Ptr(), m.Ptr(), 4<<20))
	check(t, m2.Memset(3))

	h := try(c.AllocHost(4096, HostPortable|HostMapped)).must(t)
	if h.Bytes()[100] != 0 || try(h.DevicePtr()).must(t) != DevicePtr(h.Addr()) {
		t.Fatal("host memory not zeroed or not mapped")
	}

	// dma-buf.
	fd := try(m.DmabufFD()).must(t)
	closeFD(fd)
	buf := try(c.DmabufRange(m.Ptr().Add(5000), 10)).must(t)
	if buf.Offset != 5000-4096 || buf.Size != 4096 {
		t.Fatalf("dma-buf range %+v", buf)
	}
	check(t, buf.Close())
	if info := try(LookupPointer(uintptr(m.Ptr()))).must(t); info.Type != MemoryDevice || info.Device != 0 {
		t.Fatalf("pointer %+v", info)
	}

	// VMM: property layout, access descriptors, fd passing.
	v := try(c.AllocVMM(3<<20, VMMOptions{Exportable: true, GPUDirectRDMA: true})).must(t)
	if v.Size() != 4<<20 || stat(t, d0, statRDMA) != 1 || stat(t, d0, statHandleTypes) != 1 ||
		stat(t, d0, statAccessFlags) != 3 || stat(t, d0, statAccessCount) != 1 {
		t.Fatalf("vmm size %d rdma %d handles %d", v.Size(), stat(t, d0, statRDMA), stat(t, d0, statHandleTypes))
	}
	check(t, v.GrantAccess(d1))
	if stat(t, d0, statAccessCount) != 2 {
		t.Fatal("GrantAccess did not list both devices")
	}
	if _, err := c1.AllocVMM(1, VMMOptions{GPUDirectRDMA: true}); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("GPUDirect VMM on a device without it: %v", err)
	}
	a, bf := try2(SocketPair())
	b := try(UnixConnFromFile(bf)).must(t)
	check(t, SendMemory(a, v))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	imp := try(ReceiveMemory(ctx, b, c)).must(t)
	if imp.Size() != v.Size() || !imp.IsVMM() || imp.Ptr() == v.Ptr() {
		t.Fatalf("imported %d bytes at %#x", imp.Size(), uint64(imp.Ptr()))
	}
	// Two mappings of one allocation: a store through either is seen
	// through the other.
	check(t, v.CopyFromHost(4096, []byte("exported")))
	seen := make([]byte, 8)
	check(t, imp.CopyToHost(seen, 4096))
	if string(seen) != "exported" {
		t.Fatalf("the import sees %q", seen)
	}
	if stat(t, d0, statVMMHandles) != 2 || stat(t, d0, statVMMMappings) != 2 || stat(t, d0, statVMMRanges) != 2 {
		t.Fatalf("vmm handles %d mappings %d ranges %d, want 2 each", stat(t, d0, statVMMHandles),
			stat(t, d0, statVMMMappings), stat(t, d0, statVMMRanges))
	}
	a.Close()
	b.Close()
	if _, err := m.ExportFD(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("export of cuMemAlloc memory: %v", err)
	}

	// Modules and launches.
	if _, err := c.LoadModule([]byte("not a cubin")); err == nil {
		t.Fatal("bad image loaded")
	} else if e := (*Error)(nil); !errors.As(err, &e) || e.Code != 200 || e.Msg != "fake driver error" {
		t.Fatalf("bad image error: %v", err)
	}
	mod := try(c.LoadModule([]byte("\x7fELF fake cubin"))).must(t)
	add := try(mod.Function("fake_add")).must(t)
	if _, err := mod.Function("missing"); err == nil {
		t.Fatal("missing kernel found")
	}
	ctr := try(c.Alloc(8)).must(t)
	check(t, ctr.Memset(0))
	check(t, add.Launch(LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 1}}, ctr.Ptr(), uint32(5)))
	args := try(mod.Function("fake_args")).must(t)
	out := try(c.Alloc(8)).must(t)
	check(t, args.Launch(LaunchConfig{}, uint8(1), uint16(2), uint32(3), uint64(4), float32(0.5), 0.25, out.Ptr()))
	ob := make([]byte, 8)
	check(t, out.CopyToHost(ob, 0))
	if got := math.Float64frombits(binary.LittleEndian.Uint64(ob)); got != 10.75 {
		t.Fatalf("packed arguments summed to %v, want 10.75", got)
	}
	coop := LaunchConfig{Grid: Dim3{X: 8}, Block: Dim3{X: 32}, Cooperative: true}
	check(t, add.Launch(coop, ctr.Ptr(), uint32(1)))
	coop.Grid.X = 9
	// Refused before the driver (which would answer 720), naming the size
	// that fits: 2 blocks per SM x 4 SMs.
	if err := add.Launch(coop, ctr.Ptr(), uint32(1)); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "launch at most 8 blocks") {
		t.Fatalf("oversized cooperative grid: %v, want ErrInvalidArgument naming 8 blocks", err)
	}
	if n := try(add.MaxActiveBlocksPerSM(128, 0)).must(t); n != 2 {
		t.Fatalf("occupancy %d", n)
	}
	if stat(t, d0, statCoopLaunches) != 1 {
		t.Fatal("cooperative launch not used")
	}

	// Graphs: two launches captured, replayed 1000 times.
	st := try(c.NewStream(true)).must(t)
	g := try(st.Capture(CaptureGlobal, func(s *Stream) error {
		cfg := LaunchConfig{Stream: s}
		if err := add.Launch(cfg, ctr.Ptr(), uint32(1)); err != nil {
			return err
		}
		return add.Launch(cfg, ctr.Ptr(), uint32(2))
	})).must(t)
	if stat(t, d0, statCaptureMode) != int(CaptureGlobal) {
		t.Fatal("capture mode")
	}
	ge := try(g.Instantiate()).must(t)
	for i := 0; i < 1000; i++ {
		check(t, ge.Launch(st))
	}
	check(t, st.SynchronizeContext(ctx))
	cb := make([]byte, 8)
	check(t, ctr.CopyToHost(cb, 0))
	if n := binary.LittleEndian.Uint64(cb); n != 5+1+3000 {
		t.Fatalf("counter %d after launches and replays", n)
	}

	// Events.
	e1, e2 := try(c.NewEvent(true)).must(t), try(c.NewEvent(true)).must(t)
	check(t, e1.Record(st))
	check(t, e2.Record(st))
	check(t, e2.Wait(ctx))
	if d := try(Elapsed(e1, e2)).must(t); d != 1500*time.Microsecond {
		t.Fatalf("elapsed %v", d)
	}

	// Flags fall back to mapped host memory without gdrdrv, and say so.
	fl := try(c.NewFlags(3, FlagAuto)).must(t)
	if fl.Kind() != FlagHostMapped {
		t.Fatalf("flag kind %v", fl.Kind())
	}
	f := fl.Flag(2)
	f.Set(42)
	if f.Load() != 42 || f.DevicePtr() == 0 || !fl.Flag(3).IsZero() {
		t.Fatal("flags")
	}
	check(t, f.Wait(ctx, 42))
	if _, err := c.NewFlags(1, FlagGDR); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("GDR flags without gdrdrv: %v", err)
	}
	// With a (stand-in) gdrdrv node and the fake GDRCopy: the BAR mapping
	// must start at flag 0, and a CPU Set must land in device memory.
	gdrdrvPath = os.Args[0]
	gf := try(c.NewFlags(600, FlagGDR)).must(t)
	if gf.Kind() != FlagGDR || gf.Len() != 600 {
		t.Fatalf("gdr flags %v %d", gf.Kind(), gf.Len())
	}
	for _, i := range []int{0, 1, 599} {
		fi := gf.Flag(i)
		if uint64(fi.DevicePtr())-uint64(gf.Flag(0).DevicePtr()) != uint64(i*flagStride) {
			t.Fatalf("flag %d at %#x", i, uint64(fi.DevicePtr()))
		}
		fi.Set(uint32(1000 + i))
		word := make([]byte, 4)
		check(t, c.CopyDtoH(word, fi.DevicePtr()))
		if v := binary.LittleEndian.Uint32(word); v != uint32(1000+i) || fi.Load() != v {
			t.Fatalf("gdr flag %d: device sees %d, CPU reads %d", i, v, fi.Load())
		}
	}
	if uint64(gf.Flag(0).DevicePtr())%gpuPage != 0 {
		t.Fatal("gdr flags not on a GPU page boundary")
	}
	// Words: any 4-byte offset, through the BAR mapping like a flag.
	for _, off := range []int{4, 64, 68, 600*FlagBytes - 4} {
		w := gf.Word(off)
		w.Set(uint32(7000 + off))
		word := make([]byte, 4)
		check(t, c.CopyDtoH(word, w.DevicePtr()))
		if uint64(w.DevicePtr())-uint64(gf.Flag(0).DevicePtr()) != uint64(off) ||
			binary.LittleEndian.Uint32(word) != uint32(7000+off) || w.Load() != uint32(7000+off) {
			t.Fatalf("gdr word at %d: device sees %d, CPU reads %d", off, binary.LittleEndian.Uint32(word), w.Load())
		}
	}
	for _, off := range []int{-4, 2, 600 * FlagBytes} {
		if !gf.Word(off).IsZero() {
			t.Fatalf("word at %d of %d bytes given", off, 600*FlagBytes)
		}
	}
	check(t, gf.Close())
	auto := try(c.NewFlags(1, FlagAuto)).must(t)
	if auto.Kind() != FlagGDR {
		t.Fatalf("FlagAuto chose %v with GDRCopy present", auto.Kind())
	}
	check(t, auto.Close())

	// NVRTC (fake): compile, cache, reuse, recover from a damaged entry,
	// and report compile errors with the log.
	if maj, mnr, err := NVRTCVersion(); err != nil || maj != 13 || mnr != 0 {
		t.Fatalf("nvrtc version %d.%d %v", maj, mnr, err)
	}
	cacheDir := t.TempDir()
	src := Source{Name: "k.cu", Code: "extern \"C\" __global__ void fake_add() {}"}
	km, st1, err := c.CompileModule(src, CompileOptions{CacheDir: cacheDir, Options: []string{"-lineinfo"}})
	check(t, err)
	check(t, km.Close())
	km, st2, err := c.CompileModule(src, CompileOptions{CacheDir: cacheDir, Options: []string{"-lineinfo"}})
	check(t, err)
	if st1.CacheHit || st1.Compile == 0 || !st2.CacheHit || !km.FromCache() || st2.Key != st1.Key {
		t.Fatalf("cache: first %+v second %+v", st1, st2)
	}
	check(t, km.Close())
	// An entry that is not an image is a miss; one the driver refuses
	// (from another driver, say) is recompiled and replaced.
	entry := filepath.Join(cacheDir, st1.Key+".cubin")
	for _, bad := range []string{"damaged", "\x7fELF STALE"} {
		check(t, os.WriteFile(entry, []byte(bad), 0o644))
		km, st, err := c.CompileModule(src, CompileOptions{CacheDir: cacheDir, Options: []string{"-lineinfo"}})
		check(t, err)
		if st.CacheHit {
			t.Fatalf("bad cache entry %q served", bad)
		}
		check(t, km.Close())
		km, st, err = c.CompileModule(src, CompileOptions{CacheDir: cacheDir, Options: []string{"-lineinfo"}})
		check(t, err)
		if !st.CacheHit {
			t.Fatalf("bad cache entry %q not replaced", bad)
		}
		check(t, km.Close())
	}
	if st1.Arch != "sm_90a" || st1.ArchNote != "" {
		t.Fatalf("arch %q note %q", st1.Arch, st1.ArchNote)
	}
	// An NVRTC without the architecture-specific target: the portable one
	// is used, and the result says so, from the cache too.
	portable := Source{Name: "p.cu", Code: "// FAKE_PORTABLE_ONLY\n" + src.Code}
	for _, hit := range []bool{false, true} {
		km, st, err := c.CompileModule(portable, CompileOptions{CacheDir: cacheDir})
		check(t, err)
		if st.CacheHit != hit || st.Arch != "sm_90" || !strings.Contains(st.ArchNote, "no sm_90a target: compiled for sm_90") {
			t.Fatalf("portable fallback (hit %v): %+v", hit, st)
		}
		check(t, km.Close())
	}
	res, err := CompileSource(portable, "sm_90a")
	check(t, err)
	if res.Arch != "sm_90" || res.Note == "" || !strings.Contains(string(res.Image), "#line 1 \"p.cu\"") {
		t.Fatalf("CompileSource fallback: arch %q note %q", res.Arch, res.Note)
	}
	var ce *CompileError
	_, _, err = c.CompileModule(Source{Name: "bad.cu", Code: "FAKE_ERROR"}, CompileOptions{CacheDir: "off"})
	if !errors.As(err, &ce) || !errors.Is(err, ErrCompile) || ce.Arch != "sm_90a" || !strings.Contains(ce.Log, "FAKE_ERROR is not defined") {
		t.Fatalf("compile error: %v", err)
	}
	check(t, c.EnablePeerAccess(c1))
	check(t, c.EnablePeerAccess(c1))

	// Close everything; the context refuses to close before that.
	if err := c.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("busy context closed: %v", err)
	}
	for _, x := range []interface{ Close() error }{fl, e1, e2, ge, g, st, mod, ctr, out, imp, v, h, m2, m} {
		check(t, x.Close())
	}
	if err := m.CopyFromHost(0, []byte{1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("use after close: %v", err)
	}
	if n := stat(t, d0, statLiveAllocs); n != 0 {
		t.Fatalf("%d driver allocations leaked", n)
	}
	for _, w := range []int{statVMMHandles, statVMMMappings, statVMMRanges} {
		if n := stat(t, d0, w); n != 0 {
			t.Fatalf("%d vmm objects (statistic %d) leaked", n, w)
		}
	}
	runtime.GC()
	// An object dropped without Close is counted once collected.
	before := LeakedObjects()
	func() { try(c.Alloc(64)).must(t) }()
	for i := 0; i < 20 && LeakedObjects() == before; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if LeakedObjects() != before+1 {
		t.Fatalf("leak count %d, want %d", LeakedObjects(), before+1)
	}
	if before != 0 {
		t.Fatalf("%d objects leaked before the deliberate one", before)
	}
	c.dropChild() // the deliberate leak still counts as open
	check(t, c.Close())
	check(t, c1.Close())
	if _, err := c.Alloc(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("alloc in closed context: %v", err)
	}
}

func try2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}
