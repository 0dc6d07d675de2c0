package fabric

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/hostfiles"
	"golang.org/x/sys/unix"
)

// HostBuffer is page-aligned host memory from mmap, outside the Go heap,
// so it can be handed to a NIC. Free it exactly once; using Bytes after
// Free faults.
//
// The memory is a shared mapping of a sealed memfd where the kernel has
// memfd_create (see HostMemoryFile), so same-host providers can map it
// into their peers' address spaces; elsewhere it is anonymous and private.
type HostBuffer struct {
	b        []byte
	file     int // the memfd backing b, or -1
	hugePage int // the huge page size backing b, or 0 for base pages
	freed    atomic.Bool
}

// AllocHost maps n bytes (rounded up to the page size) of zeroed host
// memory: a shared mapping of a new sealed memfd, or, where memfd_create
// is refused, anonymous private memory (then Shareable reports false).
// Being a shared mapping, the memory is shared with, not copied into, a
// child the process forks. Each buffer holds one file descriptor until
// Free. Where the system has huge pages free, a buffer large enough is
// backed by them (see HugePagesAuto and PageSize).
func AllocHost(n int) (*HostBuffer, error) { return AllocHostWith(n, HostOptions{}) }

// AllocHostWith is AllocHost with options.
func AllocHostWith(n int, o HostOptions) (*HostBuffer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("alloc host memory of %d bytes: %w", n, ErrInvalidArgument)
	}
	ps := unix.Getpagesize()
	size := (n + ps - 1) / ps * ps
	if size <= 0 {
		return nil, fmt.Errorf("alloc host memory of %d bytes: %w", n, ErrInvalidArgument)
	}
	h, err := allocHuge(n, o.HugePages)
	if err != nil {
		return nil, err
	}
	if h == nil {
		if h, err = allocHostFile(size); err != nil {
			return nil, err
		}
	}
	if h == nil {
		b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			return nil, fmt.Errorf("mmap %d bytes: %w", size, memErr(err))
		}
		h = &HostBuffer{b: b, file: -1}
	}
	h.b = h.b[:n:n]
	if h.file >= 0 {
		hostfiles.AddPaged(h.Addr(), uint64(cap(h.b)), h.file, uint64(h.hugePage))
	}
	return h, nil
}

// Bytes returns the memory.
func (h *HostBuffer) Bytes() []byte { return h.b }

// Addr returns the start address.
func (h *HostBuffer) Addr() uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(h.b))) }

// Len returns the length in bytes.
func (h *HostBuffer) Len() int { return len(h.b) }

// Shareable reports whether the buffer is backed by a memory file that
// HostMemoryFile can hand to another process.
func (h *HostBuffer) Shareable() bool { return h.file >= 0 }

// Span returns the MemorySpan to register.
func (h *HostBuffer) Span() MemorySpan {
	return MemorySpan{Addr: h.Addr(), Len: uint64(len(h.b)), Device: HostDevice, DmabufFD: -1}
}

// Free unmaps the memory and closes its memory file. A second Free is a
// no-op. Peers that mapped the file keep their pages until they unmap.
func (h *HostBuffer) Free() error {
	if !h.freed.CompareAndSwap(false, true) {
		return nil
	}
	if h.file >= 0 {
		hostfiles.Remove(h.Addr(), h.file)
	}
	ps := h.PageSize()
	full := unsafe.Slice(unsafe.SliceData(h.b), (cap(h.b)+ps-1)/ps*ps)
	err := unix.Munmap(full)
	if h.file >= 0 {
		if cerr := unix.Close(h.file); err == nil {
			err = cerr
		}
	}
	return err
}

// regState is a MemoryRegion's life: registered; unregistering (new
// submits refused, operations already accepted still run); unregistered.
const (
	regLive int32 = iota
	regDying
	regDead
)

// MemoryRegion is memory registered with every NIC of one group. It is the
// local handle for writes and receives; Descriptor gives peers what they
// need. Safe for concurrent use.
type MemoryRegion struct {
	eng    *Engine
	w      *worker
	reg    *registration // the provider registration, maybe shared (Register)
	span   MemorySpan
	access Access
	keys   [MaxNICs]rdma.MemoryKeys
	desc   Descriptor
	state  atomic.Int32
	// inflight counts op contexts using the region; worker-owned.
	inflight int
	// unregWait is set by a deferred unregistration; worker-owned.
	unregWait func()
}

// Addr returns the region's start address.
func (r *MemoryRegion) Addr() uintptr { return r.span.Addr }

// Len returns the region's length.
func (r *MemoryRegion) Len() uint64 { return r.span.Len }

// Device returns the device the memory lives on.
func (r *MemoryRegion) Device() Device { return r.span.Device }

// Descriptor returns the remote-usable description of the region, or an
// error wrapping ErrInvalidArgument for a local-only registration.
func (r *MemoryRegion) Descriptor() (Descriptor, error) {
	if r.access&(AccessRemoteWrite|AccessRemoteRead) == 0 {
		return Descriptor{}, fmt.Errorf("region %#x registered local-only has no descriptor: %w", r.span.Addr, ErrInvalidArgument)
	}
	return r.desc, nil
}

// validFor reports whether r is a live region of engine e: one a new
// submit may use.
func (r *MemoryRegion) validFor(e *Engine) bool {
	return r != nil && r.eng == e && r.state.Load() == regLive
}

// usableFor reports whether a request already accepted from the caller
// may still use r: it is live, or being unregistered behind that request.
func (r *MemoryRegion) usableFor(e *Engine) bool {
	return r != nil && r.eng == e && r.state.Load() != regDead
}

// bytesAt views n bytes of non-Go memory at addr.
func bytesAt(addr uintptr, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), addr)), n)
}

// memErr gives a failed memory call (mmap, memfd_create, ftruncate) its
// category, keeping the errno: sizes the kernel refuses are
// ErrInvalidArgument, everything else (ENOMEM, a locked-memory or file
// limit) ErrNoMemory.
func memErr(err error) error {
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EFBIG) || errors.Is(err, unix.EOVERFLOW) {
		return fmt.Errorf("%w (%w)", err, ErrInvalidArgument)
	}
	return fmt.Errorf("%w (%w)", err, ErrNoMemory)
}
