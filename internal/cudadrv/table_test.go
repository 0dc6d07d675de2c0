//go:build cgo && linux

package cudadrv

import (
	"os"
	"testing"
)

// Before any driver is loaded every trampoline must return
// CUDA_ERROR_NOT_INITIALIZED instead of calling through a NULL pointer.
// (Run in a process where LoadDriver has not succeeded: the table is
// process-wide, so the test is skipped if a driver was loaded earlier.)
func TestTrampolinesBeforeLoad(t *testing.T) {
	cuLoad.mu.Lock()
	loaded := cuLoad.drv != nil
	cuLoad.mu.Unlock()
	if loaded {
		t.Skip("a driver is loaded in this process; the unloaded table cannot be observed")
	}
	d := &cgoDriver{}
	if r := d.Init(0); r != ErrNotInitialized {
		t.Fatalf("Init: %d", r)
	}
	if _, r := d.MemAlloc(nil, 4096); r != ErrNotInitialized {
		t.Fatalf("MemAlloc: %d", r)
	}
	if _, r := d.DeviceGetCount(); r != ErrNotInitialized {
		t.Fatalf("DeviceGetCount: %d", r)
	}
	p := &LaunchParams{Grid: Dim3{1, 1, 1}, Block: Dim3{1, 1, 1}, Args: make([]byte, 8), Offsets: []uint32{0}}
	if r := d.LaunchKernel(nil, p); r != ErrNotInitialized {
		t.Fatalf("LaunchKernel: %d", r)
	}
	p.Offsets = []uint32{8} // outside Args: refused before C sees it
	if r := d.LaunchKernel(nil, p); r != ErrInvalidValue {
		t.Fatalf("LaunchKernel bad offset: %d", r)
	}
	if _, r := d.ModuleLoadData(nil, nil); r != ErrInvalidValue {
		t.Fatalf("ModuleLoadData(nil): %d", r)
	}
	if r := d.MemSetAccess(nil, 0, 0, nil); r != ErrInvalidValue {
		t.Fatalf("MemSetAccess(no devices): %d", r)
	}
	if _, ok := d.GetErrorName(ErrOutOfMemory); ok {
		t.Fatal("GetErrorName answered before load")
	}
	n := &cgoNVRTC{}
	if _, _, r := n.Version(); r == NVRTCSuccess {
		t.Fatal("nvrtcVersion succeeded before load")
	}
	if _, _, r := n.Compile("x", "x.cu", nil, []string{"-arch=sm_90"}); r == NVRTCSuccess {
		t.Fatal("compile succeeded before load")
	}
	g := &cgoGDR{}
	if _, ok := g.Open(); ok {
		t.Fatal("gdr_open succeeded before load")
	}
	// The MMIO helpers work on any memory; check them on a Go word.
	var w uint32
	g.Store32(ptrOf(&w), 7)
	if g.Load32(ptrOf(&w)) != 7 {
		t.Fatal("mmio store/load")
	}
	_ = os.Getpid()
}
