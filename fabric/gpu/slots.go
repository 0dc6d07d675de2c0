package gpu

import (
	"sync/atomic"
	"unsafe"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
)

// DefaultSlots is the slot count of the memory NewCUDAWatcher allocates:
// 4 KiB of u64 slots.
const DefaultSlots = 512

// SlotMemory is the memory a Watcher polls: an array of 64-bit slots that
// writers (kernels, or goroutines in tests) update and the watcher reads
// with atomic loads. The watcher owns it once handed over and closes it.
type SlotMemory interface {
	// Slots returns the number of slots.
	Slots() int
	// Word returns the CPU's atomic view of slot i (0 <= i < Slots()).
	Word(i int) *atomic.Uint64
	// DeviceAddr returns the address a writer uses for slot i: the device
	// address for kernels, or the host address for host memory.
	DeviceAddr(i int) uint64
	// Close frees the memory; nothing may touch it afterwards.
	Close() error
}

// hostSlots is SlotMemory over mmap'd host memory.
type hostSlots struct {
	buf *fabric.HostBuffer
	n   int
}

// NewHostSlots allocates n zeroed slots of plain host memory (mmap'd,
// outside the Go heap). Only CPU threads can write them: it is the memory
// for watchers fed by the host, and for testing without a GPU.
func NewHostSlots(n int) (SlotMemory, error) {
	if n <= 0 {
		return nil, invalid("host slots: count %d", n)
	}
	buf, err := fabric.AllocHost(8 * n)
	if err != nil {
		return nil, err
	}
	return &hostSlots{buf: buf, n: n}, nil
}

func (h *hostSlots) Slots() int { return h.n }

func (h *hostSlots) Word(i int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&h.buf.Bytes()[8*i]))
}

func (h *hostSlots) DeviceAddr(i int) uint64 { return uint64(h.buf.Addr()) + 8*uint64(i) }

func (h *hostSlots) Close() error { return h.buf.Free() }

// cudaSlots is SlotMemory over pinned, host-mapped CUDA host memory.
type cudaSlots struct {
	mem *cuda.HostMemory
	dev cuda.DevicePtr
	n   int
}

// NewCUDASlots allocates n zeroed slots of pinned host memory mapped into
// every device (HostMapped|HostPortable), so kernels on any GPU write them
// at DeviceAddr while the CPU polls them.
func NewCUDASlots(c *cuda.Context, n int) (SlotMemory, error) {
	if c == nil || n <= 0 {
		return nil, invalid("cuda slots: context %v, count %d", c != nil, n)
	}
	mem, err := c.AllocHost(8*uint64(n), cuda.HostMapped|cuda.HostPortable)
	if err != nil {
		return nil, err
	}
	dev, err := mem.DevicePtr()
	if err != nil {
		_ = mem.Close()
		return nil, err
	}
	return &cudaSlots{mem: mem, dev: dev, n: n}, nil
}

func (s *cudaSlots) Slots() int                { return s.n }
func (s *cudaSlots) Word(i int) *atomic.Uint64 { return s.mem.Uint64(i) }
func (s *cudaSlots) DeviceAddr(i int) uint64   { return uint64(s.dev) + 8*uint64(i) }
func (s *cudaSlots) Close() error              { return s.mem.Close() }
