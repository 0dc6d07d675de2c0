package cuda

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/ferryrdma/ferry/internal/cudadrv"
)

// DevicePtr is a device address (a CUdeviceptr). With unified addressing
// (every 64-bit Linux platform) it is unique across devices and host.
type DevicePtr uint64

// Add returns p offset by n bytes.
func (p DevicePtr) Add(n uint64) DevicePtr { return p + DevicePtr(n) }

// DeviceMemory is device memory owned by this package: a plain cuMemAlloc
// allocation, or a VMM allocation (cuMemCreate, mapped at a reserved
// range) that can be exported to other processes and asked to be
// GPUDirect RDMA capable. Close frees it. Methods are safe for concurrent
// use; Close must not race with calls still using the memory.
type DeviceMemory struct {
	ctx  *Context
	ptr  DevicePtr
	size uint64
	vmm  *vmmState // nil for cuMemAlloc memory

	resource
}

// Alloc allocates size bytes with cuMemAlloc.
func (c *Context) Alloc(size uint64) (*DeviceMemory, error) {
	s, err := c.use("alloc")
	if err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, invalid("alloc", "size 0")
	}
	p, r := s.d.MemAlloc(c.h, size)
	if err := s.check("cuMemAlloc", r); err != nil {
		return nil, err
	}
	c.addChild()
	m := &DeviceMemory{ctx: c, ptr: DevicePtr(p), size: size}
	return track(m, &m.leak), nil
}

// Ptr returns the device address of the first byte.
func (m *DeviceMemory) Ptr() DevicePtr { return m.ptr }

// Size returns the size in bytes (for VMM memory, rounded up to the
// allocation granularity).
func (m *DeviceMemory) Size() uint64 { return m.size }

// Context returns the context the memory was allocated in.
func (m *DeviceMemory) Context() *Context { return m.ctx }

// IsVMM reports whether the memory came from AllocVMM or ImportVMM.
func (m *DeviceMemory) IsVMM() bool { return m.vmm != nil }

// check validates a range of m and returns the driver.
func (m *DeviceMemory) rangeCheck(op string, off, n uint64) (*driverState, error) {
	if m == nil {
		return nil, invalid(op, "nil memory")
	}
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, closedErr(op)
	}
	if off > m.size || n > m.size-off {
		return nil, invalid(op, "range [%d, +%d) outside %d bytes", off, n, m.size)
	}
	return m.ctx.use(op)
}

// CopyFromHost copies src to the memory at byte offset off.
func (m *DeviceMemory) CopyFromHost(off uint64, src []byte) error {
	s, err := m.rangeCheck("copy from host", off, uint64(len(src)))
	if err != nil || len(src) == 0 {
		return err
	}
	r := s.d.MemcpyHtoD(m.ctx.h, cudadrv.DevicePtr(m.ptr.Add(off)), unsafe.Pointer(&src[0]), uint64(len(src)))
	return s.check("cuMemcpyHtoD", r)
}

// CopyToHost copies len(dst) bytes from byte offset off into dst.
func (m *DeviceMemory) CopyToHost(dst []byte, off uint64) error {
	s, err := m.rangeCheck("copy to host", off, uint64(len(dst)))
	if err != nil || len(dst) == 0 {
		return err
	}
	r := s.d.MemcpyDtoH(m.ctx.h, unsafe.Pointer(&dst[0]), cudadrv.DevicePtr(m.ptr.Add(off)), uint64(len(dst)))
	return s.check("cuMemcpyDtoH", r)
}

// Memset sets every byte of the memory to v and waits.
func (m *DeviceMemory) Memset(v byte) error {
	s, err := m.rangeCheck("memset", 0, m.size)
	if err != nil {
		return err
	}
	return s.check("cuMemsetD8", s.d.MemsetD8(m.ctx.h, cudadrv.DevicePtr(m.ptr), v, m.size))
}

// CopyHtoD copies host bytes to any device address of this context.
func (c *Context) CopyHtoD(dst DevicePtr, src []byte) error {
	s, err := c.use("copy host to device")
	if err != nil || len(src) == 0 {
		return err
	}
	return s.check("cuMemcpyHtoD", s.d.MemcpyHtoD(c.h, cudadrv.DevicePtr(dst), unsafe.Pointer(&src[0]), uint64(len(src))))
}

// CopyDtoH copies len(dst) bytes from a device address into dst.
func (c *Context) CopyDtoH(dst []byte, src DevicePtr) error {
	s, err := c.use("copy device to host")
	if err != nil || len(dst) == 0 {
		return err
	}
	return s.check("cuMemcpyDtoH", s.d.MemcpyDtoH(c.h, unsafe.Pointer(&dst[0]), cudadrv.DevicePtr(src), uint64(len(dst))))
}

// CopyDtoD copies n bytes between device addresses (also across devices
// with unified addressing) and waits.
func (c *Context) CopyDtoD(dst, src DevicePtr, n uint64) error {
	s, err := c.use("copy device to device")
	if err != nil || n == 0 {
		return err
	}
	return s.check("cuMemcpyDtoD", s.d.MemcpyDtoD(c.h, cudadrv.DevicePtr(dst), cudadrv.DevicePtr(src), n))
}

// Memset sets n bytes at dst to v and waits.
func (c *Context) Memset(dst DevicePtr, v byte, n uint64) error {
	s, err := c.use("memset")
	if err != nil || n == 0 {
		return err
	}
	return s.check("cuMemsetD8", s.d.MemsetD8(c.h, cudadrv.DevicePtr(dst), v, n))
}

// DmabufFD returns a new dma-buf file descriptor for the whole memory, for
// registering it with an RDMA NIC (ibv_reg_dmabuf_mr, FI_MR_DMABUF). The
// caller owns the fd and closes it once the NIC registration holds its own
// reference. The error wraps ErrNotSupported when the driver, the kernel
// (< 5.12) or the device cannot export dma-bufs.
func (m *DeviceMemory) DmabufFD() (int, error) {
	if _, err := m.rangeCheck("dma-buf", 0, m.size); err != nil {
		return -1, err
	}
	return m.ctx.DmabufFD(m.ptr, m.size)
}

// DmabufFD returns a dma-buf fd for [ptr, ptr+n) of memory allocated in c.
// ptr and n must be multiples of the host page size (cuMemAlloc memory is
// 2 MiB aligned; VMM memory is granularity aligned).
func (c *Context) DmabufFD(ptr DevicePtr, n uint64) (int, error) {
	s, err := c.use("dma-buf")
	if err != nil {
		return -1, err
	}
	page := uint64(os.Getpagesize())
	if n == 0 || uint64(ptr)%page != 0 || n%page != 0 {
		return -1, invalid("dma-buf", "range %#x+%d is not page aligned", uint64(ptr), n)
	}
	fd, r := s.d.MemGetHandleForAddressRange(c.h, cudadrv.DevicePtr(ptr), n, cudadrv.MemRangeHandleTypeDmaBufFD, 0)
	if err := s.check("cuMemGetHandleForAddressRange", r); err != nil {
		return -1, err
	}
	if fd < 0 {
		return -1, fmt.Errorf("cuda: dma-buf: driver returned fd %d: %w", fd, ErrNotSupported)
	}
	return fd, nil
}

// Close frees the memory. Closing twice is a no-op.
func (m *DeviceMemory) Close() error {
	if m == nil {
		return nil
	}
	return m.release(m.ctx, func() error {
		s := m.ctx.s
		if m.vmm != nil {
			return m.vmm.release(s, m.ctx.h, m.ptr)
		}
		return s.check("cuMemFree", s.d.MemFree(m.ctx.h, cudadrv.DevicePtr(m.ptr)))
	})
}

// DmaBuf is a dma-buf file descriptor over a page-aligned device range
// that contains the range asked for, which starts Offset bytes into it.
// NIC registration takes (FD, Offset, length, address): ibv_reg_dmabuf_mr
// and fi_mr_dmabuf both have an offset field for this.
type DmaBuf struct {
	FD     int
	Offset uint64 // where the requested range starts inside the dma-buf
	Size   uint64 // size of the dma-buf (page multiple)
}

// Close closes the fd.
func (b DmaBuf) Close() error {
	if b.FD < 0 {
		return nil
	}
	return syscallClose(b.FD)
}

// DmabufRange is DmabufFD for any range: it widens [ptr, ptr+n) to host
// page boundaries (device allocations are at least 2 MiB granular, so the
// widened range stays inside the allocation) and reports the offset.
func (c *Context) DmabufRange(ptr DevicePtr, n uint64) (DmaBuf, error) {
	if n == 0 {
		return DmaBuf{FD: -1}, invalid("dma-buf", "empty range")
	}
	page := uint64(os.Getpagesize())
	base := uint64(ptr) / page * page
	end := roundUp(uint64(ptr)+n, page)
	fd, err := c.DmabufFD(DevicePtr(base), end-base)
	if err != nil {
		return DmaBuf{FD: -1}, err
	}
	return DmaBuf{FD: fd, Offset: uint64(ptr) - base, Size: end - base}, nil
}
