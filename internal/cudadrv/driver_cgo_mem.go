//go:build cgo && linux

package cudadrv

/*
#include "cu_table.h"
*/
import "C"

import "unsafe"

func dptr(p DevicePtr) C.CUdeviceptr { return C.CUdeviceptr(p) }

func (d *cgoDriver) MemAlloc(c Context, size uint64) (DevicePtr, Result) {
	var p C.CUdeviceptr
	r := C.ferry_cuMemAlloc(ctx(c), &p, C.size_t(size))
	return DevicePtr(p), res(r)
}

func (d *cgoDriver) MemFree(c Context, p DevicePtr) Result {
	return res(C.ferry_cuMemFree(ctx(c), dptr(p)))
}

func (d *cgoDriver) MemHostAlloc(c Context, size uint64, flags uint32) (unsafe.Pointer, Result) {
	var p unsafe.Pointer
	r := C.ferry_cuMemHostAlloc(ctx(c), &p, C.size_t(size), C.uint(flags))
	return p, res(r)
}

func (d *cgoDriver) MemFreeHost(c Context, p unsafe.Pointer) Result {
	return res(C.ferry_cuMemFreeHost(ctx(c), p))
}

func (d *cgoDriver) MemHostGetDevicePointer(c Context, p unsafe.Pointer) (DevicePtr, Result) {
	var dp C.CUdeviceptr
	r := C.ferry_cuMemHostGetDevicePointer(ctx(c), &dp, p)
	return DevicePtr(dp), res(r)
}

func (d *cgoDriver) Memcpy(c Context, dst, src unsafe.Pointer, n uint64) Result {
	return res(C.ferry_cuMemcpy(ctx(c), dst, src, C.size_t(n)))
}

func (d *cgoDriver) MemcpyHtoD(c Context, dst DevicePtr, src unsafe.Pointer, n uint64) Result {
	return res(C.ferry_cuMemcpyHtoD(ctx(c), dptr(dst), src, C.size_t(n)))
}

func (d *cgoDriver) MemcpyDtoH(c Context, dst unsafe.Pointer, src DevicePtr, n uint64) Result {
	return res(C.ferry_cuMemcpyDtoH(ctx(c), dst, dptr(src), C.size_t(n)))
}

func (d *cgoDriver) MemcpyDtoD(c Context, dst, src DevicePtr, n uint64) Result {
	return res(C.ferry_cuMemcpyDtoD(ctx(c), dptr(dst), dptr(src), C.size_t(n)))
}

func (d *cgoDriver) MemcpyAsync(c Context, dst, src DevicePtr, n uint64, s Stream) Result {
	return res(C.ferry_cuMemcpyAsync(ctx(c), dptr(dst), dptr(src), C.size_t(n), stream(s)))
}

func (d *cgoDriver) MemsetD8(c Context, dst DevicePtr, v byte, n uint64) Result {
	return res(C.ferry_cuMemsetD8(ctx(c), dptr(dst), C.uchar(v), C.size_t(n)))
}

func (d *cgoDriver) MemsetD8Async(c Context, dst DevicePtr, v byte, n uint64, s Stream) Result {
	return res(C.ferry_cuMemsetD8Async(ctx(c), dptr(dst), C.uchar(v), C.size_t(n), stream(s)))
}

func (d *cgoDriver) MemGetHandleForAddressRange(c Context, p DevicePtr, n uint64, handleType int, flags uint64) (int, Result) {
	var fd C.int
	r := C.ferry_cuMemGetHandleForAddressRange(ctx(c), &fd, dptr(p), C.size_t(n), C.int(handleType), C.ulonglong(flags))
	return int(fd), res(r)
}

func propArgs(p AllocProp) (C.int, C.int, C.int) {
	rdma := C.int(0)
	if p.GPUDirectRDMA {
		rdma = 1
	}
	return C.int(p.Device), C.int(p.HandleTypes), rdma
}

func (d *cgoDriver) MemGetAllocationGranularity(c Context, prop AllocProp, option int) (uint64, Result) {
	var g C.size_t
	dev, ht, rdma := propArgs(prop)
	r := C.ferry_cuMemGetAllocationGranularity(ctx(c), &g, dev, ht, rdma, C.int(option))
	return uint64(g), res(r)
}

func (d *cgoDriver) MemCreate(c Context, size uint64, prop AllocProp) (MemHandle, Result) {
	var h C.CUmemGenericAllocationHandle
	dev, ht, rdma := propArgs(prop)
	r := C.ferry_cuMemCreate(ctx(c), &h, C.size_t(size), dev, ht, rdma)
	return MemHandle(h), res(r)
}

func (d *cgoDriver) MemRelease(c Context, h MemHandle) Result {
	return res(C.ferry_cuMemRelease(ctx(c), C.CUmemGenericAllocationHandle(h)))
}

func (d *cgoDriver) MemAddressReserve(c Context, size, align uint64, addr DevicePtr) (DevicePtr, Result) {
	var p C.CUdeviceptr
	r := C.ferry_cuMemAddressReserve(ctx(c), &p, C.size_t(size), C.size_t(align), dptr(addr))
	return DevicePtr(p), res(r)
}

func (d *cgoDriver) MemAddressFree(c Context, p DevicePtr, size uint64) Result {
	return res(C.ferry_cuMemAddressFree(ctx(c), dptr(p), C.size_t(size)))
}

func (d *cgoDriver) MemMap(c Context, p DevicePtr, size, offset uint64, h MemHandle) Result {
	return res(C.ferry_cuMemMap(ctx(c), dptr(p), C.size_t(size), C.size_t(offset), C.CUmemGenericAllocationHandle(h)))
}

func (d *cgoDriver) MemUnmap(c Context, p DevicePtr, size uint64) Result {
	return res(C.ferry_cuMemUnmap(ctx(c), dptr(p), C.size_t(size)))
}

func (d *cgoDriver) MemSetAccess(c Context, p DevicePtr, size uint64, devices []Device) Result {
	if len(devices) == 0 || len(devices) > 64 {
		return ErrInvalidValue
	}
	devs := make([]C.int, len(devices))
	for i, dv := range devices {
		devs[i] = C.int(dv)
	}
	return res(C.ferry_cuMemSetAccess(ctx(c), dptr(p), C.size_t(size), &devs[0], C.int(len(devs))))
}

func (d *cgoDriver) MemExportToShareableHandle(c Context, h MemHandle, handleType int) (int, Result) {
	var fd C.int
	r := C.ferry_cuMemExportToShareableHandle(ctx(c), &fd, C.CUmemGenericAllocationHandle(h), C.int(handleType))
	return int(fd), res(r)
}

func (d *cgoDriver) MemImportFromShareableHandle(c Context, fd int, handleType int) (MemHandle, Result) {
	var h C.CUmemGenericAllocationHandle
	r := C.ferry_cuMemImportFromShareableHandle(ctx(c), &h, C.int(fd), C.int(handleType))
	return MemHandle(h), res(r)
}
