//go:build cgo

package efa

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ofi"
)

// RegisterMemory registers span with fi_mr_regattr and returns its keys,
// following the negotiated mr_mode:
//
//   - Mode is rdma.AddrVirtual with FI_MR_VIRT_ADDR, else rdma.AddrOffset
//     (peers then address the region by offset from its start);
//   - Remote is the provider's key with FI_MR_PROV_KEY, else a key this
//     domain picked, unique within it;
//   - Local is fi_mr_desc, the descriptor passed in every op on the region.
//
// CUDA memory needs a provider with FI_HMEM (EFA); it is registered through
// its dma-buf fd where this libfabric has FI_MR_DMABUF and span.DmabufFD is
// set, else as an FI_HMEM_CUDA address range. Without FI_HMEM the error
// wraps rdma.ErrNotSupported. A span that is empty, at address 0 or
// wrapping around wraps rdma.ErrInvalidArgument.
func (d *Domain) RegisterMemory(span rdma.MemorySpan, access rdma.Access) (rdma.MemoryKeys, error) {
	if d.ep == nil {
		return rdma.MemoryKeys{}, errClosed
	}
	if span.Addr == 0 || span.Len == 0 || uint64(span.Addr) > math.MaxUint64-span.Len {
		return rdma.MemoryKeys{}, fmt.Errorf("register memory: span %#x+%d: %w",
			span.Addr, span.Len, rdma.ErrInvalidArgument)
	}
	if access&^(rdma.AccessRemoteWrite|rdma.AccessRemoteRead) != 0 {
		return rdma.MemoryKeys{}, fmt.Errorf("register memory: access %#x: %w", access, rdma.ErrInvalidArgument)
	}
	spec := ofi.MRSpec{
		Addr:     uint64(span.Addr),
		Len:      span.Len,
		Access:   ofi.AccessSend | ofi.AccessRecv | ofi.AccessRead | ofi.AccessWrite,
		DmabufFD: -1,
	}
	// Remote read only when asked: a writable region is not readable.
	if access&rdma.AccessRemoteWrite != 0 {
		spec.Access |= ofi.AccessRemoteWrite
	}
	if access&rdma.AccessRemoteRead != 0 {
		spec.Access |= ofi.AccessRemoteRead
	}
	if span.Device.IsCUDA() {
		if !d.hmem {
			return rdma.MemoryKeys{}, fmt.Errorf("register %s memory: libfabric provider %s has no FI_HMEM "+
				"support (this libfabric %s build cannot register CUDA memory): %w",
				span.Device, d.provName, ofi.Version(), rdma.ErrNotSupported)
		}
		spec.CUDA = true
		spec.Device = span.Device.Ordinal()
		if span.DmabufFD >= 0 && ofi.DmabufSupported() {
			spec.DmabufFD = span.DmabufFD
		}
	}
	if d.mrMode&ofi.MRProvKey == 0 {
		d.nextKey++
		spec.RequestedKey = d.nextKey
	}
	mr, err := d.ep.RegMR(spec)
	if err != nil {
		return rdma.MemoryKeys{}, callError(d.transport, "fi_mr_regattr", err)
	}
	h := mrHandle(mr)
	d.mrs[h] = mr
	return rdma.MemoryKeys{Handle: h, Local: mr.Desc, Remote: mr.Key, Mode: d.AddrMode()}, nil
}

// mrHandle is the identity of a registration as the engine sees it. It is
// the address of the Go wrapper, used only as a map key here, never turned
// back into a pointer.
func mrHandle(mr *ofi.MR) uintptr { return uintptr(unsafe.Pointer(mr)) }

// RegistrationMode: libfabric domains are opened with FI_THREAD_DOMAIN,
// under which the application serializes every call on a domain, data
// path and registration alike, so registration cannot run beside the
// worker's posts and polls on the same domain. Each domain of a group is a
// libfabric domain of its own, though: they register at once, each on its
// own goroutine, while the worker waits for the slowest instead of the
// sum.
func (d *Domain) RegistrationMode() rdma.RegistrationMode { return rdma.RegisterNICsInParallel }

var _ rdma.Registrar = (*Domain)(nil)

// UnregisterMemory releases a registration made by this domain. Keys it did
// not make give an error wrapping rdma.ErrUnknownRegion.
func (d *Domain) UnregisterMemory(keys rdma.MemoryKeys) error {
	if d.ep == nil {
		return errClosed
	}
	mr, ok := d.mrs[keys.Handle]
	if !ok {
		return fmt.Errorf("unregister memory: handle %#x: %w", keys.Handle, rdma.ErrUnknownRegion)
	}
	delete(d.mrs, keys.Handle)
	if err := mr.Close(); err != nil {
		return callError(d.transport, "fi_close(mr)", err)
	}
	return nil
}
