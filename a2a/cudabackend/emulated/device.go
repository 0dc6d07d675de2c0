package emulated

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/ferryrdma/ferry/a2a/cudabackend"
	cu "github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/cuda/emu"
	"github.com/ferryrdma/ferry/fabric"
)

// Default launch of emulated kernels: a few blocks of two warps, which
// covers every grid-level path of the kernels (several blocks, strided
// tokens, the last-block signals) at a cost two shared cores can carry.
const (
	DefaultGrid  = 4
	DefaultBlock = 64
)

// Device is the emulator as an a2a/cudabackend Device. Safe for concurrent use.
// Each Device is its own emulated GPU: the emulator's scope checker counts
// threads of different Devices as outside each other's gpu scope, as
// ranks on different GPUs are.
type Device struct {
	id     uint32
	flush  func() error
	blocks int // blocks resident at once (cudabackend.ResidentDevice); 0: MaxBlocks
}

// MaxBlocks is how many blocks the emulator runs at once (each on its own
// OS thread): an emulated device's default capacity.
const MaxBlocks = 1024

var _ cudabackend.ResidentDevice = Device{}

// NewDeviceHolding returns a new emulated device that holds at most
// blocks blocks at once (cudabackend.ResidentDevice), as a GPU of that many SMs
// at one block per SM would: to test the backend's co-residency rules.
func NewDeviceHolding(blocks int) Device { return Device{id: devices.Add(1), blocks: blocks} }

// Key names the emulated device.
func (d Device) Key() string { return fmt.Sprintf("emulated device %d", d.id) }

var _ cudabackend.ExportingDevice = Device{}

var devices atomic.Uint32

// NewDevice returns a new emulated device.
func NewDevice() Device { return Device{id: devices.Add(1)} }

// NewFlushingDevice returns a new emulated device whose GPUDirect RDMA
// flush (cudabackend.RDMAFlusher) runs flush: tests pair it with memfabric's
// late-data mode (memfabric.SetLateData, memfabric.Flush), where the
// NIC's payloads land only when flushed, as on a GPU that needs the flush.
func NewFlushingDevice(flush func() error) Device { return Device{id: devices.Add(1), flush: flush} }

// FlushRDMA runs the device's flush, if it has one.
func (d Device) FlushRDMA() error {
	if d.flush == nil {
		return nil
	}
	return d.flush()
}

func (Device) Name() string { return "cpu emulator" }

// Load builds every source with g++ against the host side of
// ferry_device.h (or takes it from the emulator's cache) and loads them as
// one program.
func (d Device) Load(ctx context.Context, builds []cudabackend.Build) (_ cudabackend.Program, err error) {
	p := &program{d: d}
	defer func() {
		if err != nil {
			_ = p.Close()
		}
	}()
	for _, b := range builds {
		m, err := emu.Build(ctx, emu.BuildSpec{Name: b.Source.Name,
			Sources: []cu.Source{{Name: b.Source.Name, Code: b.Source.Code}}, Defines: b.Defines})
		if err != nil {
			return nil, err
		}
		p.mods = append(p.mods, m)
		for _, name := range b.Kernels {
			k, err := m.Kernel(name)
			if err != nil {
				return nil, err
			}
			p.table.Add(name, k)
		}
	}
	return p, nil
}

// program is emulator modules and their kernels.
type program struct {
	d     Device
	mods  []*emu.Module
	table cudabackend.KernelTable[*emu.Kernel]
}

func (p *program) Kernel(name string) (cudabackend.Kernel, error) { return p.table.Kernel(name) }

// NewStream starts a stream on the program's emulated device.
func (p *program) NewStream() (cudabackend.Stream, error) {
	return stream{s: emu.NewDeviceStream(p.d.id), p: p}, nil
}

// MaxResidentBlocks is the device's capacity, whatever the kernel.
func (p *program) MaxResidentBlocks(k cudabackend.Kernel, _ int) (int, error) {
	if _, err := p.table.Get(k); err != nil {
		return 0, err
	}
	if p.d.blocks <= 0 {
		return MaxBlocks, nil
	}
	return p.d.blocks, nil
}

func (p *program) Close() error {
	var errs []error
	for _, m := range p.mods {
		errs = append(errs, m.Close())
	}
	p.mods = nil
	return errors.Join(errs...)
}

type stream struct {
	s *emu.Stream
	p *program
}

func (s stream) Launch(k cudabackend.Kernel, grid, block int, args ...any) error {
	kk, err := s.p.table.Get(k)
	if err != nil {
		return err
	}
	return s.s.Launch(kk, emu.Dim3{X: uint32(grid)}, emu.Dim3{X: uint32(block)}, 0, args...)
}

func (s stream) Sync(ctx context.Context) error { return s.s.Sync(ctx) }
func (s stream) Close() error                   { return s.s.Close() }

// memory is host memory outside the Go heap.
type memory struct{ b *fabric.HostBuffer }

func (m memory) Addr() uint64  { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(m.b.Bytes())))) }
func (m memory) Bytes() []byte { return m.b.Bytes() }
func (m memory) Free() error   { return m.b.Free() }

func (Device) Alloc(n int) (cudabackend.Memory, error) {
	b, err := fabric.AllocHost(n)
	if err != nil {
		return nil, err
	}
	return memory{b}, nil
}

func (d Device) AllocMapped(n int) (cudabackend.Memory, error) { return d.Alloc(n) }

func view(addr uint64, n int) []byte {
	// Device addresses are host addresses here, of memory outside the Go heap.
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), uintptr(addr))), n)
}

func (Device) Upload(dst uint64, b []byte) error {
	copy(view(dst, len(b)), b)
	return nil
}

func (Device) Download(b []byte, src uint64) error {
	copy(b, view(src, len(b)))
	return nil
}

func (Device) HostAddressable() bool { return true }

func (Device) Register(e *fabric.Engine, addr uint64, n int, access fabric.Access) (*fabric.MemoryRegion, error) {
	return e.Register(fabric.MemorySpan{Addr: uintptr(addr), Len: uint64(n), Device: fabric.HostDevice, DmabufFD: -1}, access)
}

func (Device) EngineDevice() fabric.Device { return fabric.HostDevice }

func (Device) DefaultLaunch() (grid, block int) { return DefaultGrid, DefaultBlock }

// AllocExportable is Alloc: emulator memory is a sealed memfd (where the
// kernel has memfd_create) that another process can map.
func (d Device) AllocExportable(n int) (cudabackend.ExportableMemory, error) {
	b, err := fabric.AllocHost(n)
	if err != nil {
		return nil, err
	}
	if !b.Shareable() {
		_ = b.Free()
		return nil, fmt.Errorf("a2a emu: host memory cannot be shared between processes here (no memfd_create): %w",
			cu.ErrNotSupported)
	}
	return memory{b}, nil
}

// Import maps the memfd another process exported.
func (Device) Import(fd, size int) (cudabackend.Memory, error) {
	b, err := fabric.MapHostFile(fd, size)
	if err != nil {
		return nil, err
	}
	return memory{b}, nil
}

func (m memory) Size() int { return m.b.Len() }

func (m memory) Export() (int, error) {
	f, err := fabric.HostMemoryFile(m.b.Addr(), uint64(m.b.Len()))
	if err != nil {
		return -1, err
	}
	return f.FD, nil
}
