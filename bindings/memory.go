package main

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric"
)

// hostBuffers maps the addresses ferry_host_alloc returned to their
// buffers: C frees by pointer, as with free(3).
var hostBuffers struct {
	mu sync.Mutex
	m  map[uintptr]*fabric.HostBuffer
}

//export ferry_host_alloc
func ferry_host_alloc(size C.size_t, ptr *unsafe.Pointer) (rc C.int) {
	defer guard(&rc)
	return hostAlloc(size, fabric.HostOptions{}, ptr, nil)
}

// hostAlloc allocates size bytes with o, records them for
// ferry_host_free and returns their address in *ptr and, when pageSize is
// not nil, their page size.
func hostAlloc(size C.size_t, o fabric.HostOptions, ptr *unsafe.Pointer, pageSize *C.size_t) C.int {
	if ptr == nil {
		return fail(errInvalid("host alloc", "nil output"))
	}
	if size == 0 || uint64(size) > 1<<47 {
		return fail(errInvalid("host alloc", "%d bytes", uint64(size)))
	}
	b, err := fabric.AllocHostWith(int(size), o)
	if err != nil {
		return fail(err)
	}
	keepHost(b)
	if pageSize != nil {
		*pageSize = C.size_t(b.PageSize())
	}
	// The mapping is outside the Go heap, so handing its address to C
	// breaks no cgo rule.
	*ptr = unsafe.Pointer(unsafe.SliceData(b.Bytes()))
	return C.int(codeOK)
}

// keepHost records b for ferry_host_free.
func keepHost(b *fabric.HostBuffer) {
	hostBuffers.mu.Lock()
	if hostBuffers.m == nil {
		hostBuffers.m = map[uintptr]*fabric.HostBuffer{}
	}
	hostBuffers.m[b.Addr()] = b
	hostBuffers.mu.Unlock()
}

//export ferry_host_free
func ferry_host_free(ptr unsafe.Pointer) (rc C.int) {
	defer guard(&rc)
	hostBuffers.mu.Lock()
	b, ok := hostBuffers.m[uintptr(ptr)]
	if ok {
		if r := liveRegionIn(b.Addr(), uint64(b.Len())); r != nil {
			hostBuffers.mu.Unlock()
			return fail(fmt.Errorf("host free %p: still registered as [%#x, +%d): unregister it first: %w",
				ptr, r.Addr(), r.Len(), fabric.ErrBusy))
		}
		delete(hostBuffers.m, uintptr(ptr))
	}
	hostBuffers.mu.Unlock()
	if !ok {
		return fail(errInvalid("host free", "%p was not returned by ferry_host_alloc (or was freed)", ptr))
	}
	return result(b.Free())
}

// liveRegionIn returns a region handle's region overlapping [addr,
// +n), if any. Freeing registered memory would let the NIC write into
// whatever the address space maps there next; a scan of the handle table
// is cheap next to an munmap, and catches that mistake.
func liveRegionIn(addr uintptr, n uint64) *fabric.MemoryRegion {
	var found *fabric.MemoryRegion
	handles.m.Range(func(_, v any) bool {
		r, ok := v.(*regionObj)
		if ok && uint64(r.r.Addr()) < uint64(addr)+n && uint64(addr) < uint64(r.r.Addr())+r.r.Len() {
			found = r.r
			return false
		}
		return true
	})
	return found
}

// regionObj is what a region handle names.
type regionObj struct {
	eng *engineObj
	r   *fabric.MemoryRegion
}

// regionOf looks up a region. A missing region is ErrUnknownRegion, as
// in the Go API (nil, unregistered or foreign regions).
func regionOf(op string, h C.ferry_region_t) (*regionObj, error) {
	r, err := lookup[*regionObj](&handles, uint64(h), "region")
	if err != nil {
		return nil, fmt.Errorf("%s: region handle %d: %w", op, uint64(h), fabric.ErrUnknownRegion)
	}
	return r, nil
}

//export ferry_register
func ferry_register(h C.ferry_engine_t, addr unsafe.Pointer, n C.uint64_t, access C.int32_t, out *C.ferry_region_t) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if out == nil {
		return fail(errInvalid("register", "nil output"))
	}
	acc, err := accessOf("register", access)
	if err != nil {
		return fail(err)
	}
	span := fabric.MemorySpan{Addr: uintptr(addr), Len: uint64(n), Device: fabric.HostDevice, DmabufFD: -1}
	r, err := o.e.Register(span, acc)
	if err != nil {
		return fail(err)
	}
	rh := handles.add(&regionObj{eng: o, r: r})
	if !o.adopt(rh) {
		// Closed while registering: Close already unregistered it.
		handles.remove(rh)
		return fail(fmt.Errorf("register: %w", fabric.ErrClosed))
	}
	*out = C.ferry_region_t(rh)
	return C.int(codeOK)
}

//export ferry_unregister
func ferry_unregister(h C.ferry_region_t) (rc C.int) {
	defer guard(&rc)
	r, err := release[*regionObj](&handles, uint64(h), "region")
	if err != nil {
		return fail(fmt.Errorf("unregister: region handle %d: %w", uint64(h), fabric.ErrUnknownRegion))
	}
	r.eng.disown(uint64(h))
	return result(r.eng.e.Unregister(r.r))
}

//export ferry_region_descriptor
func ferry_region_descriptor(h C.ferry_region_t, out *C.ferry_descriptor_t) (rc C.int) {
	defer guard(&rc)
	r, err := regionOf("region descriptor", h)
	if err != nil {
		return fail(err)
	}
	if out == nil {
		return fail(errInvalid("region descriptor", "nil output"))
	}
	d, err := r.r.Descriptor()
	if err != nil {
		return fail(err)
	}
	*out = C.ferry_descriptor_t(handles.add(&d))
	return C.int(codeOK)
}

// accessOf maps FERRY_ACCESS_* bits: FERRY_ACCESS_LOCAL (none),
// FERRY_ACCESS_REMOTE_WRITE, FERRY_ACCESS_REMOTE_READ (1.5), or both.
func accessOf(op string, access C.int32_t) (fabric.Access, error) {
	if access&^(C.FERRY_ACCESS_REMOTE_WRITE|C.FERRY_ACCESS_REMOTE_READ) != 0 {
		return 0, errInvalid(op, "access %d", int32(access))
	}
	a := fabric.AccessLocal
	if access&C.FERRY_ACCESS_REMOTE_WRITE != 0 {
		a |= fabric.AccessRemoteWrite
	}
	if access&C.FERRY_ACCESS_REMOTE_READ != 0 {
		a |= fabric.AccessRemoteRead
	}
	return a, nil
}
