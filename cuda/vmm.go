package cuda

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/ferryrdma/ferry/internal/cudadrv"
)

// VMMOptions choose what a VMM allocation can do.
type VMMOptions struct {
	// Exportable makes the allocation exportable as a POSIX fd
	// (DeviceMemory.ExportFD, SendMemory) for other processes to map.
	Exportable bool
	// GPUDirectRDMA asks for memory a NIC may access (needs
	// DeviceInfo.GPUDirectVMM; refused with ErrNotSupported otherwise).
	GPUDirectRDMA bool
}

// vmmState is what a VMM allocation needs to be torn down.
type vmmState struct {
	handle  cudadrv.MemHandle
	reserve uint64 // size of the reserved range (= mapped size)
	export  bool
}

func (v *vmmState) release(s *driverState, c cudadrv.Context, p DevicePtr) error {
	return errors.Join(
		s.check("cuMemUnmap", s.d.MemUnmap(c, cudadrv.DevicePtr(p), v.reserve)),
		s.check("cuMemAddressFree", s.d.MemAddressFree(c, cudadrv.DevicePtr(p), v.reserve)),
		s.check("cuMemRelease", s.d.MemRelease(c, v.handle)),
	)
}

func (o VMMOptions) prop(d Device) cudadrv.AllocProp {
	p := cudadrv.AllocProp{Device: d.h, GPUDirectRDMA: o.GPUDirectRDMA}
	if o.Exportable {
		p.HandleTypes = cudadrv.MemHandleTypePosixFD
	}
	return p
}

// Granularity returns the size VMM allocations are rounded up to.
func (c *Context) Granularity(o VMMOptions) (uint64, error) {
	s, err := c.use("vmm granularity")
	if err != nil {
		return 0, err
	}
	g, r := s.d.MemGetAllocationGranularity(c.h, o.prop(c.dev), cudadrv.GranularityRecommended)
	if err := s.check("cuMemGetAllocationGranularity", r); err != nil {
		return 0, err
	}
	if g == 0 {
		return 0, fmt.Errorf("cuda: vmm granularity is 0: %w", ErrNotSupported)
	}
	return g, nil
}

func roundUp(n, g uint64) uint64 { return (n + g - 1) / g * g }

// AllocVMM allocates at least size bytes with cuMemCreate, maps them at a
// reserved address range and grants this device read/write access.
func (c *Context) AllocVMM(size uint64, o VMMOptions) (*DeviceMemory, error) {
	s, err := c.use("alloc vmm")
	if err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, invalid("alloc vmm", "size 0")
	}
	if o.GPUDirectRDMA {
		if v, err := c.dev.Attribute(AttrGPUDirectRDMAWithVMM); err != nil || v == 0 {
			return nil, fmt.Errorf("cuda: alloc vmm: %s cannot make GPUDirect RDMA VMM memory: %w", c.dev, ErrNotSupported)
		}
	}
	g, err := c.Granularity(o)
	if err != nil {
		return nil, err
	}
	size = roundUp(size, g)
	h, r := s.d.MemCreate(c.h, size, o.prop(c.dev))
	if err := s.check("cuMemCreate", r); err != nil {
		return nil, err
	}
	m, err := c.mapVMM(s, h, size, g)
	if err != nil {
		s.d.MemRelease(c.h, h)
		return nil, err
	}
	m.vmm.export = o.Exportable
	return m, nil
}

// mapVMM reserves an address range for handle h, maps it and grants
// access. On failure it undoes what it did, but leaves h to the caller.
func (c *Context) mapVMM(s *driverState, h cudadrv.MemHandle, size, align uint64) (*DeviceMemory, error) {
	p, r := s.d.MemAddressReserve(c.h, size, align, 0)
	if err := s.check("cuMemAddressReserve", r); err != nil {
		return nil, err
	}
	if err := s.check("cuMemMap", s.d.MemMap(c.h, p, size, 0, h)); err != nil {
		s.d.MemAddressFree(c.h, p, size)
		return nil, err
	}
	if err := s.check("cuMemSetAccess", s.d.MemSetAccess(c.h, p, size, []cudadrv.Device{c.dev.h})); err != nil {
		s.d.MemUnmap(c.h, p, size)
		s.d.MemAddressFree(c.h, p, size)
		return nil, err
	}
	c.addChild()
	m := &DeviceMemory{ctx: c, ptr: DevicePtr(p), size: size, vmm: &vmmState{handle: h, reserve: size}}
	return track(m, &m.leak), nil
}

// ExportFD exports a VMM allocation made with Exportable as a new POSIX
// file descriptor, which the caller owns. Another process maps it with
// ImportVMM (send it with SendFD or SendMemory: SCM_RIGHTS needs no ptrace
// capability, unlike pidfd_getfd).
func (m *DeviceMemory) ExportFD() (int, error) {
	s, err := m.rangeCheck("export", 0, m.size)
	if err != nil {
		return -1, err
	}
	if m.vmm == nil || !m.vmm.export {
		return -1, invalid("export", "memory was not allocated with AllocVMM(Exportable)")
	}
	fd, r := s.d.MemExportToShareableHandle(m.ctx.h, m.vmm.handle, cudadrv.MemHandleTypePosixFD)
	if err := s.check("cuMemExportToShareableHandle", r); err != nil {
		return -1, err
	}
	return fd, nil
}

// ImportVMM maps an allocation exported by another process (fd from
// ExportFD) into this context. size is the exporter's Size. The fd stays
// the caller's to close.
func (c *Context) ImportVMM(fd int, size uint64) (*DeviceMemory, error) {
	s, err := c.use("import vmm")
	if err != nil {
		return nil, err
	}
	if fd < 0 || size == 0 {
		return nil, invalid("import vmm", "fd %d size %d", fd, size)
	}
	g, err := c.Granularity(VMMOptions{Exportable: true})
	if err != nil {
		return nil, err
	}
	if size%g != 0 {
		return nil, invalid("import vmm", "size %d is not a multiple of the granularity %d", size, g)
	}
	h, r := s.d.MemImportFromShareableHandle(c.h, fd, cudadrv.MemHandleTypePosixFD)
	if err := s.check("cuMemImportFromShareableHandle", r); err != nil {
		return nil, err
	}
	m, err := c.mapVMM(s, h, size, g)
	if err != nil {
		s.d.MemRelease(c.h, h)
		return nil, err
	}
	return m, nil
}

// GrantAccess lets the given devices read and write a VMM allocation (the
// VMM form of peer mapping); the owning device always has access.
func (m *DeviceMemory) GrantAccess(devices ...Device) error {
	s, err := m.rangeCheck("grant access", 0, m.size)
	if err != nil {
		return err
	}
	if m.vmm == nil {
		return invalid("grant access", "not VMM memory; use Context.EnablePeerAccess")
	}
	hs := []cudadrv.Device{m.ctx.dev.h}
	for _, d := range devices {
		if d.h != m.ctx.dev.h {
			hs = append(hs, d.h)
		}
	}
	return s.check("cuMemSetAccess", s.d.MemSetAccess(m.ctx.h, cudadrv.DevicePtr(m.ptr), m.size, hs))
}

// closeFD closes an fd this package created and the caller did not take.
func closeFD(fd int) {
	if fd >= 0 {
		syscall.Close(fd)
	}
}

func syscallClose(fd int) error { return syscall.Close(fd) }
