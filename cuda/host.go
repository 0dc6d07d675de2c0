package cuda

import (
	"sync/atomic"
	"unsafe"

	"github.com/ferryrdma/ferry/internal/cudadrv"
)

// HostFlags choose how pinned host memory is allocated.
type HostFlags uint32

const (
	// HostPortable: pinned for every context, not only the allocating one.
	HostPortable HostFlags = cudadrv.MemHostAllocPortable
	// HostMapped: also mapped into the device address space, so kernels
	// can read and write it (DevicePtr). This is how a kernel reports to a
	// CPU thread that polls the memory (the engine's scalar watcher).
	HostMapped HostFlags = cudadrv.MemHostAllocDeviceMap
	// HostWriteCombined: fast for the CPU to write and the device to read,
	// very slow for the CPU to read. Not for flags the CPU polls.
	HostWriteCombined HostFlags = cudadrv.MemHostAllocWriteCombined
)

// HostMemory is pinned (page-locked) host memory from cuMemHostAlloc,
// zeroed. It is C memory: the NIC may register it and kernels may use it
// (HostMapped) while Go code reads it through Bytes or the atomic views.
// Close frees it; nothing may use it afterwards.
type HostMemory struct {
	ctx   *Context
	p     unsafe.Pointer
	size  uint64
	dev   DevicePtr // 0 unless HostMapped
	flags HostFlags

	resource
}

// AllocHost allocates size bytes of pinned host memory, zeroed. For memory
// a kernel writes and the CPU watches, use HostPortable|HostMapped.
func (c *Context) AllocHost(size uint64, flags HostFlags) (*HostMemory, error) {
	s, err := c.use("alloc host")
	if err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, invalid("alloc host", "size 0")
	}
	p, r := s.d.MemHostAlloc(c.h, size, uint32(flags))
	if err := s.check("cuMemHostAlloc", r); err != nil {
		return nil, err
	}
	h := &HostMemory{ctx: c, p: p, size: size, flags: flags}
	clear(unsafe.Slice((*byte)(p), size))
	if flags&HostMapped != 0 {
		dp, r := s.d.MemHostGetDevicePointer(c.h, p)
		if err := s.check("cuMemHostGetDevicePointer", r); err != nil {
			s.d.MemFreeHost(c.h, p)
			return nil, err
		}
		h.dev = DevicePtr(dp)
	}
	c.addChild()
	return track(h, &h.leak), nil
}

// Size returns the size in bytes.
func (h *HostMemory) Size() uint64 { return h.size }

// Pointer returns the host address of the first byte.
func (h *HostMemory) Pointer() unsafe.Pointer { return h.p }

// Addr returns the host address as an integer (for fabric.MemorySpan).
func (h *HostMemory) Addr() uintptr { return uintptr(h.p) }

// Bytes returns the memory as a byte slice (valid until Close).
func (h *HostMemory) Bytes() []byte { return unsafe.Slice((*byte)(h.p), h.size) }

// DevicePtr returns the address kernels use for this memory, or an error
// wrapping ErrInvalidArgument when it was not allocated with HostMapped.
func (h *HostMemory) DevicePtr() (DevicePtr, error) {
	if h.flags&HostMapped == 0 {
		return 0, invalid("host device pointer", "memory not allocated with HostMapped")
	}
	return h.dev, nil
}

// Uint64 returns an atomic view of the i-th 8-byte word: the CPU side of a
// u64 slot that a kernel updates (device address: DevicePtr() + 8*i).
// Out-of-range i returns nil.
func (h *HostMemory) Uint64(i int) *atomic.Uint64 {
	if i < 0 || uint64(i+1)*8 > h.size {
		return nil
	}
	return (*atomic.Uint64)(unsafe.Add(h.p, 8*i))
}

// Uint32 returns an atomic view of the i-th 4-byte word, or nil.
func (h *HostMemory) Uint32(i int) *atomic.Uint32 {
	if i < 0 || uint64(i+1)*4 > h.size {
		return nil
	}
	return (*atomic.Uint32)(unsafe.Add(h.p, 4*i))
}

// Close frees the memory. Closing twice is a no-op.
func (h *HostMemory) Close() error {
	if h == nil {
		return nil
	}
	return h.release(h.ctx, func() error {
		s := h.ctx.s
		return s.check("cuMemFreeHost", s.d.MemFreeHost(h.ctx.h, h.p))
	})
}
