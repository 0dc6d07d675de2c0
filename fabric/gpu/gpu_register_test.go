package gpu

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
)

// gpuContext returns device 0's primary context, or skips with the reason
// (fails when FERRY_TEST_REQUIRE names cuda).
func gpuContext(t *testing.T) *cuda.Context {
	t.Helper()
	err := cuda.Init()
	var dev cuda.Device
	if err == nil {
		dev, err = cuda.GetDevice(0)
	}
	if err != nil {
		testutil.SkipIfNotSupported(t, "cuda", err)
	}
	c, err := dev.PrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("context close at cleanup (leaked objects?): %v", err)
		}
	})
	return c
}

// Real device memory through the real driver, registered with the fake
// provider (which records what it was handed): the path follows the
// machine's dma-buf support, dma-buf fds are open during registration and
// closed after it, and pinned host memory is refused.
func TestGPURegisterDeviceMemory(t *testing.T) {
	c := gpuContext(t)
	setFakeFaults(nil, nil)
	e, err := fabric.Open(context.Background(), fabric.Config{Transport: fakeTransport, Groups: []fabric.GroupSpec{
		{Device: fabric.HostDevice, NICs: 1}, {Device: fabric.CUDADevice(0), NICs: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	fds := openFDs(t)
	mem, err := c.Alloc(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	probe := DmabufAvailable(0)
	if probe != nil && !errors.Is(probe, fabric.ErrNotSupported) {
		t.Fatalf("inconclusive dma-buf probe: %v", probe)
	}
	t.Logf("dma-buf probe: %v", probe)

	check := func(name string, ptr uintptr, n uint64, wantPath Path) {
		t.Helper()
		setFakeFaults(nil, nil)
		reg, err := RegisterReport(e, ptr, n, fabric.AccessRemoteWrite, RegisterOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: %v", name, reg)
		if reg.Path != wantPath || reg.Device != fabric.CUDADevice(0) {
			t.Fatalf("%s: %v, want %v", name, reg, wantPath)
		}
		for _, s := range fakeSeen() {
			if wantPath == PathDmabuf && (!s.fdOpen || s.span.DmabufOffset != 0) {
				t.Fatalf("%s: domain saw %+v, fd open %v", name, s.span, s.fdOpen)
			}
			if wantPath == PathDmabuf && fdOpen(s.span.DmabufFD) {
				t.Fatalf("%s: dma-buf fd %d left open", name, s.span.DmabufFD)
			}
			if wantPath == PathPeerMemory && s.span.DmabufFD != -1 {
				t.Fatalf("%s: fd %d on the peer-memory path", name, s.span.DmabufFD)
			}
		}
		if err := e.Unregister(reg.Region); err != nil {
			t.Fatal(err)
		}
	}
	aligned := PathPeerMemory
	if probe == nil {
		aligned = PathDmabuf
	}
	base := uintptr(mem.Ptr())
	check("whole allocation", base, mem.Size(), aligned)
	check("page-aligned slice", base+64<<10, 64<<10, aligned)
	check("unaligned tensor", base+100, 1000, PathPeerMemory)
	if r, err := RegisterDeviceMemory(e, mem, fabric.AccessLocal); err != nil {
		t.Fatal(err)
	} else if err := e.Unregister(r); err != nil {
		t.Fatal(err)
	}

	pinned, err := c.AllocHost(1<<16, cuda.HostMapped|cuda.HostPortable)
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	_, err = Register(e, pinned.Addr(), 1<<16, fabric.AccessLocal)
	var mt *MemoryTypeError
	if !errors.As(err, &mt) || mt.Type != cuda.MemoryHost {
		t.Fatalf("pinned host memory: %v", err)
	}
	if e.Regions() != 0 {
		t.Fatalf("%d regions left", e.Regions())
	}
	if now := openFDs(t); now > fds {
		t.Fatalf("open fds %d -> %d", fds, now)
	}
}
