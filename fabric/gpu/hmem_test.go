package gpu_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/cuda"
	_ "github.com/ferryrdma/ferry/efa"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/gpu"
)

// openGPUEngine opens an engine on transport with a host group and a
// cuda:0 group, or skips when the transport is not usable here (unless
// FERRY_TEST_REQUIRE names "libfabric").
func openGPUEngine(t *testing.T, transport, node string) *fabric.Engine {
	t.Helper()
	e, err := fabric.Open(context.Background(), fabric.Config{Transport: transport, Node: node, Logger: quiet,
		Groups: []fabric.GroupSpec{{Device: fabric.HostDevice, NICs: 1}, {Device: fabric.CUDADevice(0), NICs: 2}}})
	if err != nil {
		if errors.Is(err, fabric.ErrNotSupported) {
			testutil.Skip(t, "libfabric", "transport %s cannot run here: %v", transport, err)
		}
		t.Fatalf("open %s: %v", transport, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return e
}

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Debian's libfabric tcp and shm providers have no FI_HMEM: a CUDA span
// (here host memory labelled cuda:0, which is all the provider can check)
// must fail with ErrNotSupported saying so, with or without a dma-buf fd,
// and leave no registration or fd behind.
func TestLibfabricWithoutHMEMRefusesCUDASpans(t *testing.T) {
	for _, tr := range []struct{ transport, node string }{{"tcp;ofi_rxm", "127.0.0.1"}, {"shm", ""}} {
		t.Run(tr.transport, func(t *testing.T) {
			e := openGPUEngine(t, tr.transport, tr.node)
			buf, err := fabric.AllocHost(1 << 16)
			if err != nil {
				t.Fatal(err)
			}
			defer buf.Free()
			memfd, err := unix.MemfdCreate("not-a-dmabuf", unix.MFD_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(memfd)
			fds := countFDs(t)
			for _, fd := range []int{-1, memfd} {
				span := fabric.MemorySpan{Addr: buf.Addr(), Len: uint64(buf.Len()), Device: fabric.CUDADevice(0), DmabufFD: fd}
				_, err := e.Register(span, fabric.AccessRemoteWrite)
				if !errors.Is(err, fabric.ErrNotSupported) || !strings.Contains(err.Error(), "FI_HMEM") {
					t.Fatalf("dma-buf fd %d: %v, want ErrNotSupported naming FI_HMEM", fd, err)
				}
				t.Logf("fd %d: %v", fd, err)
			}
			if e.Regions() != 0 {
				t.Fatalf("%d regions after refused registrations", e.Regions())
			}
			if _, err := unix.FcntlInt(uintptr(memfd), unix.F_GETFD, 0); err != nil {
				t.Fatalf("the provider closed the caller's fd: %v", err)
			}
			if now := countFDs(t); now > fds {
				t.Fatalf("open fds %d -> %d", fds, now)
			}
			// Host memory still registers on the same engine.
			r, err := e.RegisterHost(buf, fabric.AccessRemoteWrite)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Unregister(r); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// gpu.Register through the real driver. Without one (this machine) the
// lookup fails with ErrNotSupported; with one, host memory is refused.
func TestRegisterHostMemoryWithRealDriver(t *testing.T) {
	e := openGPUEngine(t, "mem", "")
	buf, err := fabric.AllocHost(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	_, err = gpu.Register(e, buf.Addr(), 4096, fabric.AccessLocal)
	if cuda.Init() != nil {
		if !errors.Is(err, fabric.ErrNotSupported) {
			t.Fatalf("without a driver: %v, want ErrNotSupported", err)
		}
		if testutil.Required("cuda") {
			t.Fatalf("FERRY_TEST_REQUIRE=cuda but there is no driver: %v", err)
		}
		t.Logf("no driver: %v", err)
		return
	}
	if !errors.Is(err, gpu.ErrNotDeviceMemory) {
		t.Fatalf("host memory: %v, want ErrNotDeviceMemory", err)
	}
}

func TestDmabufAvailable(t *testing.T) {
	err := gpu.DmabufAvailable(0)
	if err != nil && !errors.Is(err, fabric.ErrNotSupported) {
		t.Fatalf("inconclusive probe: %v", err)
	}
	t.Logf("dma-buf on cuda:0: %v", err)
}

// Real device memory on Debian's libfabric tcp provider: refused with
// ErrNotSupported naming FI_HMEM, after trying both paths, nothing left.
func TestGPURegisterOnTCPRefused(t *testing.T) {
	c := requireCUDA(t)
	e := openGPUEngine(t, "tcp;ofi_rxm", "127.0.0.1")
	mem, err := c.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	fds := countFDs(t)
	_, err = gpu.RegisterDeviceMemory(e, mem, fabric.AccessRemoteWrite)
	if !errors.Is(err, fabric.ErrNotSupported) || !strings.Contains(err.Error(), "FI_HMEM") {
		t.Fatalf("%v, want ErrNotSupported naming FI_HMEM", err)
	}
	t.Log(err)
	if e.Regions() != 0 || countFDs(t) > fds {
		t.Fatalf("regions %d, fds %d -> %d", e.Regions(), fds, countFDs(t))
	}
}
