package cudabackend

import (
	"context"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/fabric"
)

// Device is where the kernels run and their memory lives: a GPU through
// the CUDA driver (NewDriverDevice), or the CPU emulator of the CUDA
// execution model (package a2a/cudabackend/emulated), where device memory is host
// memory. The backend is the same code over both.
type Device interface {
	// Name says which device this is, for reports.
	Name() string
	// Load compiles each build's source (a complete translation unit) with
	// its defines ("-DNAME=VALUE") for this device and loads them, together,
	// as one Program.
	Load(ctx context.Context, builds []Build) (Program, error)
	// Alloc returns n bytes of zeroed device memory.
	Alloc(n int) (Memory, error)
	// AllocMapped returns n bytes of zeroed host memory that kernels can
	// address (flags, the receive plan, the count table).
	AllocMapped(n int) (Memory, error)
	// Upload copies b to device memory at dst; Download copies device
	// memory at src into b. Both are synchronous.
	Upload(dst uint64, b []byte) error
	Download(b []byte, src uint64) error
	// HostAddressable reports whether kernels can read and write ordinary
	// host memory (Go slices) directly, so the a2a.Backend methods pass the
	// caller's slices as they are instead of staging them.
	HostAddressable() bool
	// Register registers n bytes of device memory at addr with the engine.
	Register(e *fabric.Engine, addr uint64, n int, access fabric.Access) (*fabric.MemoryRegion, error)
	// EngineDevice is the engine group that device memory belongs to
	// (fabric.HostDevice on the emulator).
	EngineDevice() fabric.Device
	// DefaultLaunch is the grid (blocks) and block (threads) size to use
	// when Options leave them 0.
	DefaultLaunch() (grid, block int)
}

// RDMAFlusher is a Device whose NIC writes may reach kernels after a flag
// the CPU raises on their completion. The backend calls FlushRDMA after
// the engine counted every immediate of a phase and before it raises the
// flag the kernels poll (DriverDevice: cuFlushGPUDirectRDMAWrites where
// cuda.Device.NeedsRDMAFlush says so, below sm_90 and on C2C platforms).
type RDMAFlusher interface {
	FlushRDMA() error
}

// ResidentDevice is a Device that holds a bounded number of blocks at
// once. Every a2a kernel is a cooperative launch whose blocks spin on
// flags, so a kernel whose blocks cannot all be resident never ends, and
// neither do the kernels of the other ranks waiting for it. The backend
// therefore checks, at New:
//   - its own grid: at most Program.MaxResidentBlocks of every kernel (an error
//     naming the grid to use, instead of the driver's refusal at the first
//     launch);
//   - the rule for concurrent contexts (two micro-batches on two streams,
//     or two models): the grids of all live backends on one device (same
//     Key) must fit on it together, so every kernel of every context can
//     be resident whatever the other streams run. A backend that would
//     overcommit the device is refused, naming the blocks left; Close
//     gives its blocks back. Options.Overcommit opts a backend out, for
//     callers that keep the contexts' kernels apart themselves (lock step).
//
// Kernels of other libraries that occupy SMs for long (a persistent GEMM)
// are outside this count: leave room for them with Options.Grid.
type ResidentDevice interface {
	// Key names the physical device: Devices with the same Key share it.
	Key() string
}

// ControlDevice is a Device that places the control block (the words the
// CPU worker and the kernels signal each other through) in memory of its
// choosing: DriverDevice puts it in device memory the CPU reaches through
// a GDRCopy mapping where GDRCopy and its gdrdrv module are present (the
// kernels then spin on local memory instead of polling across PCIe), and
// in pinned host memory mapped into the device otherwise. Other devices'
// control blocks are AllocMapped memory.
type ControlDevice interface {
	AllocControl(n int) (Control, error)
}

// Control is a control block of n bytes (zeroed).
type Control interface {
	// Addr is the address kernels use.
	Addr() uint64
	// Word is the 32-bit word at byte offset off, as the CPU reads and
	// writes it.
	Word(off int) ControlWord
	// Kind says where the words live ("gdrcopy", "host-mapped").
	Kind() string
	Free() error
}

// ControlWord is one word of a control block: loads acquire, stores
// release. No read-modify-write: a GDRCopy mapping is write-combined,
// where locked instructions are not allowed.
type ControlWord interface {
	Load() uint32
	Store(v uint32)
}

// hostControl is a control block in memory the CPU addresses directly.
type hostControl struct{ m Memory }

func (c hostControl) Addr() uint64 { return c.m.Addr() }
func (c hostControl) Word(off int) ControlWord {
	return (*atomic.Uint32)(unsafe.Pointer(&c.m.Bytes()[off]))
}
func (c hostControl) Kind() string { return "host-mapped" }
func (c hostControl) Free() error  { return c.m.Free() }

// Source is one kernel source file.
type Source struct {
	Name string
	Code string
}

// Build is one kernel source, the defines it is compiled with and the
// kernels (extern "C" names) the program takes from it.
type Build struct {
	Source  Source
	Defines []string
	Kernels []string
}

// Program is the kernels of one Device.Load and the streams they launch
// on. The device's own kernel and stream types stay inside it: the
// backend names kernels by Kernel and queues them on a Program's Stream,
// so neither side ever converts one back. Safe for concurrent use.
type Program interface {
	// Kernel returns the kernel called name (an extern "C" name in one of
	// the builds).
	Kernel(name string) (Kernel, error)
	// NewStream returns an in-order queue of this program's launches.
	NewStream() (Stream, error)
	// MaxResidentBlocks is how many blocks of block threads of k the whole
	// device holds at once (occupancy per SM times SMs): what a
	// cooperative launch of k may have.
	MaxResidentBlocks(k Kernel, block int) (int, error)
	// Close unloads the kernels; their streams must be closed first.
	Close() error
}

// Kernel names a kernel of a Program: its place in the program's table
// and its name. A Program's streams launch their own program's kernel at
// that place, so a Kernel also launches on the streams of another program
// loaded from the same builds (every rank of a world loads the same): the
// name is checked at each launch. The zero Kernel is none.
type Kernel struct {
	index int // place in the program's table, plus one
	name  string
}

// NewKernel is the Kernel at place index (from 0) of a program's table,
// called name: for Program implementations.
func NewKernel(index int, name string) Kernel { return Kernel{index: index + 1, name: name} }

// Index is the kernel's place in its program's table, or -1 for the zero
// Kernel.
func (k Kernel) Index() int { return k.index - 1 }

// Name is the kernel's name ("" for the zero Kernel).
func (k Kernel) Name() string { return k.name }

// IsZero reports whether k is the zero Kernel (no kernel).
func (k Kernel) IsZero() bool { return k.index == 0 }

// Stream runs launches of its Program's kernels in order. Launch
// arguments are uint64 (addresses, 64-bit values), uint32, int32 or
// float32, in the kernel's order (laid out by cuda/internal/kernelargs on
// the GPU and on the emulator alike); every launch is cooperative (all
// blocks resident at once).
type Stream interface {
	Launch(k Kernel, grid, block int, args ...any) error
	// Sync waits until every launch so far finished, or ctx ends.
	Sync(ctx context.Context) error
	Close() error
}

// KernelTable is the lookup a Program implementation needs: kernels by
// name, by place, and the check that a Kernel names the table's kernel at
// its place. K is the device's own kernel type.
type KernelTable[K any] struct {
	kernels []K
	names   []string
}

// Add puts k, called name, at the next place.
func (t *KernelTable[K]) Add(name string, k K) {
	t.kernels = append(t.kernels, k)
	t.names = append(t.names, name)
}

// Kernel returns the Kernel called name.
func (t *KernelTable[K]) Kernel(name string) (Kernel, error) {
	for i, n := range t.names {
		if n == name {
			return NewKernel(i, n), nil
		}
	}
	return Kernel{}, fmt.Errorf("a2a cuda backend: no kernel %q in the program: %w", name, ErrKernel)
}

// Get returns the table's kernel that k names, or an error when the table
// has another kernel (or none) at k's place.
func (t *KernelTable[K]) Get(k Kernel) (K, error) {
	i := k.Index()
	if i < 0 || i >= len(t.kernels) || t.names[i] != k.name {
		var zero K
		return zero, fmt.Errorf("a2a cuda backend: launch of kernel %q, which this program does not have at place %d: %w",
			k.name, i, a2a.ErrInvalidArgument)
	}
	return t.kernels[i], nil
}

// Memory is an allocation of a Device.
type Memory interface {
	// Addr is the address kernels use.
	Addr() uint64
	// Bytes is the host view, or nil where the host cannot address it.
	Bytes() []byte
	Free() error
}

// NodeMemory shares this rank's transport buffers with the other ranks of
// its NVLink domain: CUDA VMM exports on a GPU, host memory (package
// a2a/host's LocalNode or ProcessNode) on the emulator.
type NodeMemory interface {
	// Share allocates this rank's send and receive buffers (zeroed, at
	// least the sizes asked) and, once every rank of the domain has, returns
	// their device addresses indexed by node-local rank (own included).
	Share(ctx context.Context, sendBytes, recvBytes int) (send, recv []uint64, err error)
	// Close releases the mappings.
	Close() error
}

// ExportingDevice is a Device whose memory other processes can map: a
// GPU through CUDA VMM (POSIX file descriptor handles), or the emulator
// (sealed memfds). ProcessNode needs one.
type ExportingDevice interface {
	Device
	// AllocExportable returns at least n bytes of zeroed device memory
	// that can be exported to another process.
	AllocExportable(n int) (ExportableMemory, error)
	// Import maps memory another process exported (fd from
	// ExportableMemory.Export, size its Size) and makes it accessible to
	// this device. The fd stays the caller's to close; the returned
	// Memory's Free unmaps it.
	Import(fd, size int) (Memory, error)
}

// ExportableMemory is memory of an ExportingDevice.
type ExportableMemory interface {
	Memory
	// Size is the allocation's size (what was asked, rounded up to the
	// device's granularity): what an importer maps.
	Size() int
	// Export returns a new file descriptor for the memory, which the
	// caller owns and closes.
	Export() (int, error)
}
