package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"
)

// Tests in this file need a CUDA device; they skip with the reason
// elsewhere (and fail when FERRY_TEST_REQUIRE=cuda).

func TestGPUDeviceInfo(t *testing.T) {
	c := requireCUDA(t)
	info, err := c.Device().Info()
	check(t, err)
	t.Logf("%s: %+v (driver %s, %s)", c.Device(), info, formatVersion(try(DriverVersion()).must(t)), DriverPath())
	if info.Name == "" || info.SMCount <= 0 || info.Major < 5 || info.TotalMemory == 0 {
		t.Errorf("implausible info %+v", info)
	}
	if !regexp.MustCompile(`^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`).MatchString(info.PCIBusID) {
		t.Errorf("PCI bus id %q", info.PCIBusID)
	}
	if info.Arch != ArchFor(info.Major, info.Minor) {
		t.Errorf("arch %q", info.Arch)
	}
	n, err := DeviceCount()
	if err != nil || n < 1 {
		t.Fatalf("DeviceCount %d %v", n, err)
	}
	if _, err := GetDevice(n); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("GetDevice(%d): %v", n, err)
	}
}

func TestGPUAllocCopy(t *testing.T) {
	c := requireCUDA(t)
	const size = 16 << 20
	a := try(c.Alloc(size)).must(t)
	defer a.Close()
	b := try(c.Alloc(size)).must(t)
	defer b.Close()
	want := pattern(1, size)
	check(t, a.CopyFromHost(0, want))
	check(t, c.CopyDtoD(b.Ptr(), a.Ptr(), size))
	got := make([]byte, size)
	check(t, b.CopyToHost(got, 0))
	if !bytes.Equal(got, want) {
		t.Fatal("host -> device -> device -> host changed the data")
	}
	// Partial copies at an offset, and range checks.
	check(t, b.CopyFromHost(100, []byte{9, 9, 9}))
	three := make([]byte, 3)
	check(t, c.CopyDtoH(three, b.Ptr().Add(100)))
	if !bytes.Equal(three, []byte{9, 9, 9}) {
		t.Fatalf("offset copy: %v", three)
	}
	if err := b.CopyFromHost(size-1, []byte{1, 2}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("copy past the end: %v", err)
	}
	// Stream-ordered memset and copy.
	st := try(c.NewStream(true)).must(t)
	defer st.Close()
	check(t, st.MemsetAsync(a.Ptr(), 0x5a, size))
	check(t, st.CopyAsync(b.Ptr(), a.Ptr(), size))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check(t, st.SynchronizeContext(ctx))
	check(t, b.CopyToHost(got, 0))
	if !bytes.Equal(got, bytes.Repeat([]byte{0x5a}, size)) {
		t.Fatal("async memset+copy")
	}
	check(t, a.Memset(0))
	// Use after close, and a context that refuses to close while busy.
	x := try(c.Alloc(4096)).must(t)
	if err := c.Close(); !errors.Is(err, ErrBusy) {
		t.Fatalf("context close with live memory: %v", err)
	}
	check(t, x.Close())
	check(t, x.Close())
	if err := x.CopyFromHost(0, []byte{1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("copy to closed memory: %v", err)
	}
}

func TestGPUHostMapped(t *testing.T) {
	c := requireCUDA(t)
	h := try(c.AllocHost(1<<20, HostPortable|HostMapped)).must(t)
	defer h.Close()
	dp := try(h.DevicePtr()).must(t)
	if dp == 0 || h.Addr() == 0 {
		t.Fatal("no addresses")
	}
	for _, v := range h.Bytes() {
		if v != 0 {
			t.Fatal("host memory not zeroed")
		}
	}
	check(t, c.Memset(dp, 0x42, 1<<20)) // the device writes host memory
	if h.Bytes()[12345] != 0x42 || h.Uint64(7).Load() != 0x4242424242424242 {
		t.Fatal("device write not visible to the host")
	}
	if h.Uint64(1<<17) != nil || h.Uint32(-1) != nil {
		t.Fatal("out-of-range views")
	}
	plain := try(c.AllocHost(4096, 0)).must(t)
	defer plain.Close()
	if _, err := plain.DevicePtr(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("device pointer of unmapped memory: %v", err)
	}
}

func TestGPUPointerAndDmabuf(t *testing.T) {
	c := requireCUDA(t)
	m := try(c.Alloc(4 << 20)).must(t)
	defer m.Close()
	info, err := LookupPointer(uintptr(m.Ptr()))
	check(t, err)
	if info.Type != MemoryDevice || info.Device != c.Device().Ordinal() {
		t.Fatalf("pointer info %+v", info)
	}
	if uint64(m.Ptr())%uint64(os.Getpagesize()) != 0 {
		t.Fatalf("cuMemAlloc returned %#x, not page aligned", uint64(m.Ptr()))
	}
	fd, err := m.DmabufFD()
	testutil.SkipIfNotSupported(t, "dmabuf", err)
	if fd < 0 {
		t.Fatalf("fd %d", fd)
	}
	closeFD(fd)
	fd2, err := DmabufFD(uintptr(m.Ptr()), m.Size())
	check(t, err)
	closeFD(fd2)
	if _, err := c.DmabufFD(m.Ptr().Add(1), 4096); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("unaligned dma-buf: %v", err)
	}
	// An unaligned sub-range (a tensor inside an allocation).
	buf, err := DmabufRange(uintptr(m.Ptr())+4096+100, 1000)
	check(t, err)
	if buf.FD < 0 || buf.Offset != 100 || buf.Size != uint64(os.Getpagesize()) {
		t.Fatalf("dma-buf range %+v", buf)
	}
	check(t, buf.Close())
}

func TestGPUEventsTiming(t *testing.T) {
	c := requireCUDA(t)
	st := try(c.NewStream(true)).must(t)
	defer st.Close()
	a := try(c.NewEvent(true)).must(t)
	defer a.Close()
	b := try(c.NewEvent(true)).must(t)
	defer b.Close()
	m := try(c.Alloc(64 << 20)).must(t)
	defer m.Close()
	check(t, a.Record(st))
	check(t, st.MemsetAsync(m.Ptr(), 1, m.Size()))
	check(t, b.Record(st))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check(t, b.Wait(ctx))
	d := try(Elapsed(a, b)).must(t)
	if d <= 0 || d > 10*time.Second {
		t.Fatalf("elapsed %v", d)
	}
	t.Logf("64 MiB memset: %v", d)
}

func TestGPUFillKernel(t *testing.T) {
	c := requireCUDA(t)
	mod := testModule(t, c)
	fill := try(mod.Function("ferry_test_fill")).must(t)
	const n = 1 << 20
	m := try(c.Alloc(4 * n)).must(t)
	defer m.Close()
	check(t, fill.Launch(LaunchConfig{Grid: Dim3{X: 256}, Block: Dim3{X: 256}}, m.Ptr(), uint64(n), uint32(0xabcd)))
	check(t, c.Synchronize())
	got := make([]byte, 4*n)
	check(t, m.CopyToHost(got, 0))
	for i := 0; i < n; i++ {
		want := uint32(0xabcd) ^ uint32(i)*2654435761
		if v := binary.LittleEndian.Uint32(got[4*i:]); v != want {
			t.Fatalf("p[%d] = %#x, want %#x", i, v, want)
		}
	}
	if _, err := mod.Function("no_such_kernel"); err == nil {
		t.Fatal("missing kernel found")
	}
}
