package gpu

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
)

// fakeDriver replaces the CUDA driver for one test: [dev, dev+devLen) is
// device memory of cuda:0, [host, host+hostLen) pinned host memory, the
// rest unknown. Dma-bufs are memfds; every one made is recorded.
type fakeDriver struct {
	dev, host       uintptr
	devLen, hostLen uint64
	release         string
	dmabufErr       error
	fds             []int
	dmabufCalls     int
}

func installFakeDriver(t *testing.T, f *fakeDriver) {
	t.Helper()
	saved := drv
	if f.release == "" {
		f.release = "6.1.0-18-amd64"
	}
	drv = driverOps{
		lookup: func(p uintptr) (cuda.PointerInfo, error) {
			switch {
			case p >= f.dev && p < f.dev+uintptr(f.devLen):
				return cuda.PointerInfo{Type: cuda.MemoryDevice, Device: 0}, nil
			case p >= f.host && p < f.host+uintptr(f.hostLen):
				return cuda.PointerInfo{Type: cuda.MemoryHost, Device: 0}, nil
			}
			return cuda.PointerInfo{}, &cuda.Error{Op: "cuPointerGetAttribute(MEMORY_TYPE)", Code: 1}
		},
		dmabuf: func(p uintptr, n uint64) (cuda.DmaBuf, error) {
			f.dmabufCalls++
			if f.dmabufErr != nil {
				return cuda.DmaBuf{FD: -1}, f.dmabufErr
			}
			fd, err := unix.MemfdCreate("fake-dmabuf", unix.MFD_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			f.fds = append(f.fds, fd)
			page := uint64(os.Getpagesize())
			base := uint64(p) / page * page
			return cuda.DmaBuf{FD: fd, Offset: uint64(p) - base, Size: (uint64(p) + n - base + page - 1) / page * page}, nil
		},
		osRelease: func() (string, error) { return f.release, nil },
		pageSize:  os.Getpagesize(),
	}
	t.Cleanup(func() { drv = saved })
}

// fakeEngine opens an engine on the fake provider with a host group and a
// cuda:0 group of nics NICs, and a fake device range of 1 MiB.
func fakeEngine(t *testing.T, nics int) (*fabric.Engine, *fakeDriver) {
	t.Helper()
	setFakeFaults(nil, nil)
	e, err := fabric.Open(context.Background(), fabric.Config{Transport: fakeTransport, Groups: []fabric.GroupSpec{
		{Device: fabric.HostDevice, NICs: 1}, {Device: fabric.CUDADevice(0), NICs: nics}}})
	if err != nil {
		t.Fatal(err)
	}
	devMem, err := fabric.AllocHost(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	hostMem, err := fabric.AllocHost(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	fds := openFDs(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Error(err)
		}
		_ = devMem.Free()
		_ = hostMem.Free()
		if now := openFDs(t); now > fds {
			t.Errorf("open fds: %d before, %d after (a dma-buf fd leaked?)", fds, now)
		}
	})
	f := &fakeDriver{dev: devMem.Addr(), devLen: 1 << 20, host: hostMem.Addr(), hostLen: 1 << 16}
	installFakeDriver(t, f)
	return e, f
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestRegisterDmabufPath(t *testing.T) {
	e, f := fakeEngine(t, 2)
	reg, err := RegisterReport(e, f.dev+8192, 4096*3, fabric.AccessRemoteWrite, RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if reg.Path != PathDmabuf || reg.DmabufErr != nil || reg.Device != fabric.CUDADevice(0) {
		t.Fatalf("registration %v", reg)
	}
	seen := fakeSeen()
	if len(seen) != 2 {
		t.Fatalf("%d domain registrations, want 2 (one per nic)", len(seen))
	}
	for _, s := range seen {
		if !s.fdOpen || s.span.DmabufFD != f.fds[0] || s.span.DmabufOffset != 0 || s.span.Device != fabric.CUDADevice(0) ||
			s.span.Addr != f.dev+8192 || s.span.Len != 4096*3 {
			t.Fatalf("domain saw %+v (fd open %v)", s.span, s.fdOpen)
		}
	}
	if fdOpen(f.fds[0]) {
		t.Fatal("dma-buf fd still open after registration")
	}
	r := reg.Region
	if r.Device() != fabric.CUDADevice(0) || r.Addr() != f.dev+8192 || r.Len() != 4096*3 {
		t.Fatalf("region %v %#x+%d", r.Device(), r.Addr(), r.Len())
	}
	if _, err := r.Descriptor(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reg.String(), "cuda:0 dma-buf") {
		t.Fatalf("String() = %q", reg.String())
	}
	if err := e.Unregister(r); err != nil {
		t.Fatal(err)
	}
}

func TestRegisterPeerMemoryPaths(t *testing.T) {
	for _, tc := range []struct {
		name    string
		off     uintptr
		release string
		dmaErr  error
		opts    RegisterOptions
		reason  string
		calls   int
	}{
		{name: "unaligned", off: 100, reason: "does not start on a page"},
		{name: "old-kernel", release: "5.10.0-28-amd64", reason: "needs 5.12"},
		{name: "odd-kernel", release: "weird", reason: "not understood"},
		{name: "driver-refuses", dmaErr: &cuda.Error{Op: "cuMemGetHandleForAddressRange", Code: 801}, reason: "CUDA_ERROR_NOT_SUPPORTED", calls: 1},
		{name: "disabled", opts: RegisterOptions{NoDmabuf: true}, reason: "NoDmabuf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, f := fakeEngine(t, 1)
			if tc.release != "" {
				f.release = tc.release
			}
			f.dmabufErr = tc.dmaErr
			reg, err := RegisterReport(e, f.dev+tc.off, 1000, fabric.AccessLocal, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if reg.Path != PathPeerMemory || reg.DmabufErr == nil || !strings.Contains(reg.DmabufErr.Error(), tc.reason) {
				t.Fatalf("registration %v, want peer memory because %q", reg, tc.reason)
			}
			if f.dmabufCalls != tc.calls {
				t.Fatalf("%d dma-buf requests, want %d", f.dmabufCalls, tc.calls)
			}
			for _, s := range fakeSeen() {
				if s.span.DmabufFD != -1 {
					t.Fatalf("domain got dma-buf fd %d on the peer-memory path", s.span.DmabufFD)
				}
			}
			if e.Regions() != 1 {
				t.Fatalf("%d regions", e.Regions())
			}
		})
	}
}

// A provider that cannot import the dma-buf gets the address instead.
func TestRegisterFallsBackWhenProviderRefusesDmabuf(t *testing.T) {
	e, f := fakeEngine(t, 2)
	refuse := &fabric.ProviderError{Provider: fakeTransport, Op: "ibv_reg_dmabuf_mr", Errno: 95, Msg: "operation not supported"}
	setFakeFaults(refuse, nil)
	reg, err := RegisterReport(e, f.dev, 1<<16, fabric.AccessRemoteWrite, RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if reg.Path != PathPeerMemory || !errors.Is(reg.DmabufErr, fabric.ErrProvider) {
		t.Fatalf("registration %v", reg)
	}
	if fdOpen(f.fds[0]) {
		t.Fatal("dma-buf fd left open")
	}
	if e.Regions() != 1 {
		t.Fatalf("%d regions", e.Regions())
	}
}

// A provider without GPU support: ErrNotSupported with both reasons, and
// nothing registered or left open.
func TestRegisterProviderWithoutGPU(t *testing.T) {
	e, f := fakeEngine(t, 2)
	setFakeFaults(nil, wrapNS("libfabric provider fake has no FI_HMEM support"))
	_, err := Register(e, f.dev, 4096, fabric.AccessRemoteWrite)
	if !errors.Is(err, fabric.ErrNotSupported) {
		t.Fatalf("err %v, want ErrNotSupported", err)
	}
	for _, want := range []string{"FI_HMEM", "registration through the dma-buf failed", "by address"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if e.Regions() != 0 {
		t.Fatalf("%d regions after failure", e.Regions())
	}
	if fdOpen(f.fds[0]) {
		t.Fatal("dma-buf fd left open")
	}
}

func wrapNS(msg string) error { return &nsError{msg} }

type nsError struct{ msg string }

func (e *nsError) Error() string        { return e.msg + ": " + fabric.ErrNotSupported.Error() }
func (e *nsError) Is(target error) bool { return target == fabric.ErrNotSupported }

func TestRegisterRefusesNonDeviceMemory(t *testing.T) {
	e, f := fakeEngine(t, 1)
	for _, tc := range []struct {
		name string
		ptr  uintptr
		n    uint64
		typ  cuda.MemoryType
	}{
		{"pinned-host", f.host, 4096, cuda.MemoryHost},
		{"unknown", 0x1000, 4096, cuda.MemoryUnknown},
	} {
		_, err := Register(e, tc.ptr, tc.n, fabric.AccessLocal)
		var mt *MemoryTypeError
		if !errors.As(err, &mt) || mt.Type != tc.typ || !errors.Is(err, ErrNotDeviceMemory) || !errors.Is(err, fabric.ErrInvalidArgument) {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	// A range running off the end of the device allocation.
	if _, err := Register(e, f.dev+uintptr(f.devLen)-4096, 8192, fabric.AccessLocal); !errors.Is(err, ErrNotDeviceMemory) ||
		!strings.Contains(err.Error(), "runs past") {
		t.Fatalf("range past the allocation: %v", err)
	}
	if f.dmabufCalls != 0 || e.Regions() != 0 {
		t.Fatalf("dma-buf calls %d, regions %d", f.dmabufCalls, e.Regions())
	}
}

func TestRegisterBadInput(t *testing.T) {
	e, f := fakeEngine(t, 1)
	for _, tc := range []struct {
		e   *fabric.Engine
		ptr uintptr
		n   uint64
	}{{nil, f.dev, 1}, {e, 0, 1}, {e, f.dev, 0}, {e, ^uintptr(0) - 10, 100}} {
		if _, err := Register(tc.e, tc.ptr, tc.n, fabric.AccessLocal); !errors.Is(err, fabric.ErrInvalidArgument) {
			t.Fatalf("%+v: %v", tc, err)
		}
	}
	if _, err := RegisterDeviceMemory(e, nil, fabric.AccessLocal); !errors.Is(err, fabric.ErrInvalidArgument) {
		t.Fatalf("nil device memory: %v", err)
	}
	if e.Regions() != 0 {
		t.Fatal("regions after bad input")
	}
}

// Memory on a device the engine has no group for: the engine's error at
// once, no retry, the dma-buf closed.
func TestRegisterNoGroupForDevice(t *testing.T) {
	e, f := fakeEngine(t, 1)
	base := drv.lookup
	drv.lookup = func(p uintptr) (cuda.PointerInfo, error) {
		info, err := base(p)
		info.Device = 3
		return info, err
	}
	_, err := Register(e, f.dev, 4096, fabric.AccessLocal)
	if !errors.Is(err, fabric.ErrInvalidArgument) || !strings.Contains(err.Error(), "cuda:3") {
		t.Fatalf("err %v", err)
	}
	if len(f.fds) != 1 || fdOpen(f.fds[0]) {
		t.Fatalf("dma-bufs %v (want one, closed)", f.fds)
	}
}

func TestRegisterClosedEngine(t *testing.T) {
	e, f := fakeEngine(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := Register(e, f.dev, 4096, fabric.AccessLocal); !errors.Is(err, fabric.ErrClosed) {
		t.Fatalf("err %v", err)
	}
}

func TestParseRelease(t *testing.T) {
	for _, tc := range []struct {
		s            string
		major, minor int
		ok           bool
	}{
		{"6.1.0-18-amd64", 6, 1, true}, {"5.12", 5, 12, true}, {"5.4.0-150-generic", 5, 4, true},
		{"4.19.0", 4, 19, true}, {"6.8.0-rc1", 6, 8, true}, {"6", 0, 0, false}, {"x.y", 0, 0, false}, {"", 0, 0, false},
	} {
		major, minor, ok := parseRelease(tc.s)
		if major != tc.major || minor != tc.minor || ok != tc.ok {
			t.Errorf("parseRelease(%q) = %d, %d, %v", tc.s, major, minor, ok)
		}
	}
	for rel, want := range map[string]bool{"5.11.22": false, "5.12.0": true, "6.1.0": true, "4.19": false, "10.0": true} {
		saved := drv.osRelease
		drv.osRelease = func() (string, error) { return rel, nil }
		err := kernelDmabuf()
		drv.osRelease = saved
		if (err == nil) != want || (err != nil && !errors.Is(err, fabric.ErrNotSupported)) {
			t.Errorf("kernel %s: %v", rel, err)
		}
	}
}
