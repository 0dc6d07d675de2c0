//go:build cgo && linux

package cudadrv

/*
#include <stdlib.h>
#include "aux_table.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ferryrdma/ferry/internal/dl"
)

var nvrtcSymbols = []struct {
	slot C.int
	name string
}{
	{C.N_nvrtcVersion, "nvrtcVersion"},
	{C.N_nvrtcGetErrorString, "nvrtcGetErrorString"},
	{C.N_nvrtcCreateProgram, "nvrtcCreateProgram"},
	{C.N_nvrtcDestroyProgram, "nvrtcDestroyProgram"},
	{C.N_nvrtcCompileProgram, "nvrtcCompileProgram"},
	{C.N_nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize"},
	{C.N_nvrtcGetProgramLog, "nvrtcGetProgramLog"},
	{C.N_nvrtcGetCUBINSize, "nvrtcGetCUBINSize"},
	{C.N_nvrtcGetCUBIN, "nvrtcGetCUBIN"},
}

var gdrSymbols = []struct {
	slot C.int
	name string
}{
	{C.G_gdr_open, "gdr_open"},
	{C.G_gdr_close, "gdr_close"},
	{C.G_gdr_pin_buffer, "gdr_pin_buffer"},
	{C.G_gdr_unpin_buffer, "gdr_unpin_buffer"},
	{C.G_gdr_map, "gdr_map"},
	{C.G_gdr_unmap, "gdr_unmap"},
	{C.G_gdr_runtime_get_version, "gdr_runtime_get_version"},
}

var auxLoad struct {
	mu    sync.Mutex
	nvrtc *cgoNVRTC
	gdr   *cgoGDR
}

// resolveAll looks every name up first and fills the table only when all
// resolved, so a half-loaded library never serves calls.
func resolveAll(lib *dl.Library, names []string) ([]unsafe.Pointer, error) {
	ptrs := make([]unsafe.Pointer, len(names))
	for i, n := range names {
		p, err := lib.Lookup(n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib.Path(), err)
		}
		ptrs[i] = p
	}
	return ptrs, nil
}

// LoadNVRTC opens the first candidate NVRTC library that loads. Before it,
// preload (best effort) lists libnvrtc-builtins paths: NVRTC opens its
// builtins library by soname at compile time, which fails when its
// directory is not on the loader's search path; loaded first by full path,
// the soname is already resolved. Later calls return the loaded one.
func LoadNVRTC(candidates, preload []string) (NVRTC, error) {
	auxLoad.mu.Lock()
	defer auxLoad.mu.Unlock()
	if auxLoad.nvrtc != nil {
		return auxLoad.nvrtc, nil
	}
	lib := dl.New(dl.Now|dl.Local, candidates...)
	if err := lib.Open(); err != nil {
		return nil, err
	}
	names := make([]string, len(nvrtcSymbols))
	for i, s := range nvrtcSymbols {
		names[i] = s.name
	}
	ptrs, err := resolveAll(lib, names)
	if err != nil {
		lib.Close()
		return nil, err
	}
	var builtins *dl.Library
	for _, p := range preload {
		b := dl.New(dl.Now|dl.Global, p)
		if b.Open() == nil {
			builtins = b
			break
		}
	}
	for i, s := range nvrtcSymbols {
		C.ferry_nvrtc_set(s.slot, ptrs[i])
	}
	auxLoad.nvrtc = &cgoNVRTC{lib: lib, builtins: builtins}
	return auxLoad.nvrtc, nil
}

type cgoNVRTC struct {
	lib      *dl.Library
	builtins *dl.Library
}

var _ NVRTC = (*cgoNVRTC)(nil)

func (n *cgoNVRTC) Path() string { return n.lib.Path() }

func (n *cgoNVRTC) Version() (int, int, NVRTCResult) {
	var major, minor C.int
	r := C.ferry_nvrtcVersion(&major, &minor)
	return int(major), int(minor), NVRTCResult(r)
}

func (n *cgoNVRTC) ErrorString(r NVRTCResult) string {
	s := C.ferry_nvrtcGetErrorString(C.nvrtcResult(r))
	if s == nil {
		return fmt.Sprintf("nvrtc error %d", int(r))
	}
	return C.GoString(s)
}

// cStrings copies strs into a C array of C strings (an array of pointers
// may not be passed as Go memory); free releases all of it.
func cStrings(strs []string) (arr **C.char, free func()) {
	if len(strs) == 0 {
		return nil, func() {}
	}
	arr = (**C.char)(C.calloc(C.size_t(len(strs)), C.size_t(unsafe.Sizeof(uintptr(0)))))
	s := unsafe.Slice(arr, len(strs))
	for i, o := range strs {
		s[i] = C.CString(o)
	}
	return arr, func() {
		for i := range s {
			C.free(unsafe.Pointer(s[i]))
		}
		C.free(unsafe.Pointer(arr))
	}
}

func (n *cgoNVRTC) Compile(src, name string, headers []NVRTCHeader, options []string) ([]byte, string, NVRTCResult) {
	csrc := C.CString(src)
	defer C.free(unsafe.Pointer(csrc))
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	copts, freeOpts := cStrings(options)
	defer freeOpts()
	hnames, hcodes := make([]string, len(headers)), make([]string, len(headers))
	for i, h := range headers {
		hnames[i], hcodes[i] = h.Name, h.Code
	}
	chnames, freeNames := cStrings(hnames)
	defer freeNames()
	chcodes, freeCodes := cStrings(hcodes)
	defer freeCodes()
	var clog, ccubin *C.char
	var size C.size_t
	r := C.ferry_nvrtc_compile(csrc, cname, C.int(len(headers)), chcodes, chnames, C.int(len(options)), copts, &clog, &ccubin, &size)
	var log string
	if clog != nil {
		log = C.GoString(clog)
		C.free(unsafe.Pointer(clog))
	}
	var cubin []byte
	if ccubin != nil {
		cubin = C.GoBytes(unsafe.Pointer(ccubin), C.int(size))
		C.free(unsafe.Pointer(ccubin))
	}
	return cubin, log, NVRTCResult(r)
}

// LoadGDR opens the first candidate GDRCopy library that loads. It does
// not open /dev/gdrdrv: GDR.Open does.
func LoadGDR(candidates []string) (GDR, error) {
	auxLoad.mu.Lock()
	defer auxLoad.mu.Unlock()
	if auxLoad.gdr != nil {
		return auxLoad.gdr, nil
	}
	lib := dl.New(dl.Now|dl.Local, candidates...)
	if err := lib.Open(); err != nil {
		return nil, err
	}
	names := make([]string, len(gdrSymbols))
	for i, s := range gdrSymbols {
		names[i] = s.name
	}
	ptrs, err := resolveAll(lib, names)
	if err != nil {
		lib.Close()
		return nil, err
	}
	for i, s := range gdrSymbols {
		C.ferry_gdr_set(s.slot, ptrs[i])
	}
	auxLoad.gdr = &cgoGDR{lib: lib}
	return auxLoad.gdr, nil
}

type cgoGDR struct{ lib *dl.Library }

var _ GDR = (*cgoGDR)(nil)

func (g *cgoGDR) Path() string { return g.lib.Path() }

func (g *cgoGDR) Open() (GDRHandle, bool) {
	h := C.ferry_gdr_open()
	return GDRHandle(h), h != nil
}

func (g *cgoGDR) Close(h GDRHandle) int { return int(C.ferry_gdr_close(C.gdr_t(h))) }

func (g *cgoGDR) PinBuffer(h GDRHandle, addr, size uint64) (GDRMemHandle, int) {
	var mh C.ulong
	r := C.ferry_gdr_pin_buffer(C.gdr_t(h), C.ulong(addr), C.size_t(size), &mh)
	return GDRMemHandle(mh), int(r)
}

func (g *cgoGDR) UnpinBuffer(h GDRHandle, mh GDRMemHandle) int {
	return int(C.ferry_gdr_unpin_buffer(C.gdr_t(h), C.ulong(mh)))
}

func (g *cgoGDR) Map(h GDRHandle, mh GDRMemHandle, size uint64) (unsafe.Pointer, int) {
	var va unsafe.Pointer
	r := C.ferry_gdr_map(C.gdr_t(h), C.ulong(mh), &va, C.size_t(size))
	return va, int(r)
}

func (g *cgoGDR) Unmap(h GDRHandle, mh GDRMemHandle, va unsafe.Pointer, size uint64) int {
	return int(C.ferry_gdr_unmap(C.gdr_t(h), C.ulong(mh), va, C.size_t(size)))
}

func (g *cgoGDR) RuntimeVersion() (int, int) {
	var major, minor C.int
	C.ferry_gdr_runtime_get_version(&major, &minor)
	return int(major), int(minor)
}

func (g *cgoGDR) Store32(p unsafe.Pointer, v uint32) { C.ferry_mmio_store32(p, C.uint32_t(v)) }
func (g *cgoGDR) Load32(p unsafe.Pointer) uint32     { return uint32(C.ferry_mmio_load32(p)) }
