//go:build cgo && linux

package cudadrv

/*
#include "cu_table.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ferryrdma/ferry/internal/dl"
)

// cuSymbol maps a table slot to its entry point names, newest first. Only
// names that share one C signature are listed together.
type cuSymbol struct {
	slot     C.int
	names    []string
	optional bool // absent from some supported drivers: the slot stays NULL
}

var cuSymbols = []cuSymbol{
	{C.F_cuInit, []string{"cuInit"}, false},
	{C.F_cuDriverGetVersion, []string{"cuDriverGetVersion"}, false},
	{C.F_cuGetErrorName, []string{"cuGetErrorName"}, false},
	{C.F_cuGetErrorString, []string{"cuGetErrorString"}, false},
	{C.F_cuDeviceGetCount, []string{"cuDeviceGetCount"}, false},
	{C.F_cuDeviceGet, []string{"cuDeviceGet"}, false},
	{C.F_cuDeviceGetName, []string{"cuDeviceGetName"}, false},
	{C.F_cuDeviceGetAttribute, []string{"cuDeviceGetAttribute"}, false},
	{C.F_cuDeviceGetPCIBusId, []string{"cuDeviceGetPCIBusId"}, false},
	{C.F_cuDeviceTotalMem, []string{"cuDeviceTotalMem_v2"}, false},
	{C.F_cuDeviceCanAccessPeer, []string{"cuDeviceCanAccessPeer"}, false},
	{C.F_cuDevicePrimaryCtxRetain, []string{"cuDevicePrimaryCtxRetain"}, false},
	{C.F_cuDevicePrimaryCtxRelease, []string{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}, false},
	{C.F_cuCtxGetCurrent, []string{"cuCtxGetCurrent"}, false},
	{C.F_cuCtxSetCurrent, []string{"cuCtxSetCurrent"}, false},
	{C.F_cuCtxSynchronize, []string{"cuCtxSynchronize"}, false},
	{C.F_cuCtxEnablePeerAccess, []string{"cuCtxEnablePeerAccess"}, false},
	{C.F_cuCtxDisablePeerAccess, []string{"cuCtxDisablePeerAccess"}, false},
	{C.F_cuPointerGetAttribute, []string{"cuPointerGetAttribute"}, false},
	{C.F_cuPointerSetAttribute, []string{"cuPointerSetAttribute"}, true},
	{C.F_cuMemAlloc, []string{"cuMemAlloc_v2"}, false},
	{C.F_cuMemFree, []string{"cuMemFree_v2"}, false},
	{C.F_cuMemHostAlloc, []string{"cuMemHostAlloc"}, false},
	{C.F_cuMemFreeHost, []string{"cuMemFreeHost"}, false},
	{C.F_cuMemHostGetDevicePointer, []string{"cuMemHostGetDevicePointer_v2"}, false},
	{C.F_cuMemcpy, []string{"cuMemcpy"}, false},
	{C.F_cuMemcpyHtoD, []string{"cuMemcpyHtoD_v2"}, false},
	{C.F_cuMemcpyDtoH, []string{"cuMemcpyDtoH_v2"}, false},
	{C.F_cuMemcpyDtoD, []string{"cuMemcpyDtoD_v2"}, false},
	{C.F_cuMemcpyAsync, []string{"cuMemcpyAsync"}, false},
	{C.F_cuMemsetD8, []string{"cuMemsetD8_v2"}, false},
	{C.F_cuMemsetD8Async, []string{"cuMemsetD8Async"}, false},
	{C.F_cuMemGetHandleForAddressRange, []string{"cuMemGetHandleForAddressRange"}, true},
	{C.F_cuMemGetAllocationGranularity, []string{"cuMemGetAllocationGranularity"}, true},
	{C.F_cuMemCreate, []string{"cuMemCreate"}, true},
	{C.F_cuMemRelease, []string{"cuMemRelease"}, true},
	{C.F_cuMemAddressReserve, []string{"cuMemAddressReserve"}, true},
	{C.F_cuMemAddressFree, []string{"cuMemAddressFree"}, true},
	{C.F_cuMemMap, []string{"cuMemMap"}, true},
	{C.F_cuMemUnmap, []string{"cuMemUnmap"}, true},
	{C.F_cuMemSetAccess, []string{"cuMemSetAccess"}, true},
	{C.F_cuMemExportToShareableHandle, []string{"cuMemExportToShareableHandle"}, true},
	{C.F_cuMemImportFromShareableHandle, []string{"cuMemImportFromShareableHandle"}, true},
	{C.F_cuStreamCreate, []string{"cuStreamCreate"}, false},
	{C.F_cuStreamDestroy, []string{"cuStreamDestroy_v2"}, false},
	{C.F_cuStreamSynchronize, []string{"cuStreamSynchronize"}, false},
	{C.F_cuStreamQuery, []string{"cuStreamQuery"}, false},
	{C.F_cuStreamBeginCapture, []string{"cuStreamBeginCapture_v2"}, true},
	{C.F_cuStreamEndCapture, []string{"cuStreamEndCapture"}, true},
	{C.F_cuEventCreate, []string{"cuEventCreate"}, false},
	{C.F_cuEventDestroy, []string{"cuEventDestroy_v2"}, false},
	{C.F_cuEventRecord, []string{"cuEventRecord"}, false},
	{C.F_cuEventQuery, []string{"cuEventQuery"}, false},
	{C.F_cuEventSynchronize, []string{"cuEventSynchronize"}, false},
	{C.F_cuEventElapsedTime, []string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}, false},
	{C.F_cuModuleLoadData, []string{"cuModuleLoadData"}, false},
	{C.F_cuModuleUnload, []string{"cuModuleUnload"}, false},
	{C.F_cuModuleGetFunction, []string{"cuModuleGetFunction"}, false},
	{C.F_cuFuncGetAttribute, []string{"cuFuncGetAttribute"}, false},
	{C.F_cuOccupancyMaxActiveBlocksPerMultiprocessor, []string{"cuOccupancyMaxActiveBlocksPerMultiprocessor"}, true},
	{C.F_cuLaunchKernel, []string{"cuLaunchKernel"}, false},
	{C.F_cuLaunchCooperativeKernel, []string{"cuLaunchCooperativeKernel"}, true},
	{C.F_cuGraphInstantiate, []string{"cuGraphInstantiateWithFlags"}, true},
	{C.F_cuGraphLaunch, []string{"cuGraphLaunch"}, true},
	{C.F_cuGraphExecDestroy, []string{"cuGraphExecDestroy"}, true},
	{C.F_cuGraphDestroy, []string{"cuGraphDestroy"}, true},
	{C.F_cuFlushGPUDirectRDMAWrites, []string{"cuFlushGPUDirectRDMAWrites"}, true},
}

// The C table is process-wide, so at most one driver library is loaded.
var cuLoad struct {
	mu  sync.Mutex
	drv *cgoDriver
}

// LoadDriver opens the first candidate library that loads, resolves the
// entry points and returns the driver. It does not call cuInit. Once it
// succeeded, later calls return the same driver whatever their candidates.
// A library without a required entry point is rejected (and closed) with
// an error that wraps ErrNotSupported.
func LoadDriver(candidates []string) (Driver, error) {
	cuLoad.mu.Lock()
	defer cuLoad.mu.Unlock()
	if cuLoad.drv != nil {
		return cuLoad.drv, nil
	}
	lib := dl.New(dl.Now|dl.Global, candidates...)
	if err := lib.Open(); err != nil {
		return nil, err
	}
	d := &cgoDriver{lib: lib}
	ptrs := make([]unsafe.Pointer, len(cuSymbols))
	for i, s := range cuSymbols {
		p, _, err := lib.LookupFirst(s.names...)
		if err != nil {
			if !s.optional {
				lib.Close()
				return nil, fmt.Errorf("cuda driver %s: required entry point: %w", lib.Path(), err)
			}
			d.missing = append(d.missing, s.names[0])
			continue
		}
		ptrs[i] = p
	}
	for i, s := range cuSymbols {
		C.ferry_cu_set(s.slot, ptrs[i])
	}
	C.ferry_cu_mark_loaded()
	cuLoad.drv = d
	return d, nil
}

type cgoDriver struct {
	lib     *dl.Library
	missing []string
}

var _ Driver = (*cgoDriver)(nil)

func (d *cgoDriver) Missing() []string { return append([]string(nil), d.missing...) }
func (d *cgoDriver) Path() string      { return d.lib.Path() }

func ctx(c Context) C.CUcontext  { return C.CUcontext(c) }
func stream(s Stream) C.CUstream { return C.CUstream(s) }
func event(e Event) C.CUevent    { return C.CUevent(e) }
func res(r C.CUresult) Result    { return Result(r) }
func cstr(b []C.char) string     { return C.GoString(&b[0]) }

func (d *cgoDriver) Init(flags uint32) Result { return res(C.ferry_cuInit(C.uint(flags))) }

func (d *cgoDriver) DriverGetVersion() (int, Result) {
	var v C.int
	r := C.ferry_cuDriverGetVersion(&v)
	return int(v), res(r)
}

func (d *cgoDriver) GetErrorName(r Result) (string, bool) {
	var s *C.char
	if C.ferry_cuGetErrorName(C.CUresult(r), &s) != 0 || s == nil {
		return "", false
	}
	return C.GoString(s), true
}

func (d *cgoDriver) GetErrorString(r Result) (string, bool) {
	var s *C.char
	if C.ferry_cuGetErrorString(C.CUresult(r), &s) != 0 || s == nil {
		return "", false
	}
	return C.GoString(s), true
}

func (d *cgoDriver) DeviceGetCount() (int, Result) {
	var n C.int
	r := C.ferry_cuDeviceGetCount(&n)
	return int(n), res(r)
}

func (d *cgoDriver) DeviceGet(ordinal int) (Device, Result) {
	var dev C.CUdevice
	r := C.ferry_cuDeviceGet(&dev, C.int(ordinal))
	return Device(dev), res(r)
}

func (d *cgoDriver) DeviceGetName(dev Device) (string, Result) {
	var buf [256]C.char
	r := C.ferry_cuDeviceGetName(&buf[0], C.int(len(buf)-1), C.CUdevice(dev))
	if r != 0 {
		return "", res(r)
	}
	return cstr(buf[:]), Success
}

func (d *cgoDriver) DeviceGetAttribute(a Attribute, dev Device) (int, Result) {
	var v C.int
	r := C.ferry_cuDeviceGetAttribute(&v, C.int(a), C.CUdevice(dev))
	return int(v), res(r)
}

func (d *cgoDriver) DeviceGetPCIBusID(dev Device) (string, Result) {
	var buf [64]C.char
	r := C.ferry_cuDeviceGetPCIBusId(&buf[0], C.int(len(buf)-1), C.CUdevice(dev))
	if r != 0 {
		return "", res(r)
	}
	return cstr(buf[:]), Success
}

func (d *cgoDriver) DeviceTotalMem(dev Device) (uint64, Result) {
	var n C.size_t
	r := C.ferry_cuDeviceTotalMem(&n, C.CUdevice(dev))
	return uint64(n), res(r)
}

func (d *cgoDriver) DeviceCanAccessPeer(dev, peer Device) (bool, Result) {
	var v C.int
	r := C.ferry_cuDeviceCanAccessPeer(&v, C.CUdevice(dev), C.CUdevice(peer))
	return v != 0, res(r)
}

func (d *cgoDriver) DevicePrimaryCtxRetain(dev Device) (Context, Result) {
	var c C.CUcontext
	r := C.ferry_cuDevicePrimaryCtxRetain(&c, C.CUdevice(dev))
	return Context(c), res(r)
}

func (d *cgoDriver) DevicePrimaryCtxRelease(dev Device) Result {
	return res(C.ferry_cuDevicePrimaryCtxRelease(C.CUdevice(dev)))
}

func (d *cgoDriver) CtxSynchronize(c Context) Result { return res(C.ferry_cuCtxSynchronize(ctx(c))) }

func (d *cgoDriver) CtxEnablePeerAccess(c, peer Context) Result {
	return res(C.ferry_cuCtxEnablePeerAccess(ctx(c), ctx(peer)))
}

func (d *cgoDriver) CtxDisablePeerAccess(c, peer Context) Result {
	return res(C.ferry_cuCtxDisablePeerAccess(ctx(c), ctx(peer)))
}

func (d *cgoDriver) PointerGetAttribute(attr int, p DevicePtr) (uint64, Result) {
	var v C.ulonglong
	r := C.ferry_cuPointerGetAttribute(&v, C.int(attr), C.CUdeviceptr(p))
	return uint64(v), res(r)
}

func (d *cgoDriver) PointerSetAttribute(c Context, attr int, v uint32, p DevicePtr) Result {
	return res(C.ferry_cuPointerSetAttribute(ctx(c), C.int(attr), C.uint(v), C.CUdeviceptr(p)))
}
