package cudabackend

import (
	"context"
	"errors"
	"fmt"

	cu "github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/gpu"
)

// DriverDevice runs the kernels on a GPU through package cuda: NVRTC
// builds for the exact architecture (cached on disk), cooperative
// launches, device memory for the kernels' state and transport buffers
// (registered with the engine as GPU memory), pinned host memory mapped
// into the device for the flags, the receive plan and the count table.
// Caller slices are staged through device copies.
type DriverDevice struct {
	ctx          *cu.Context
	sms          int
	name         string
	major, minor int  // compute capability
	flush        bool // NIC writes need a flush before the CPU's flag (cu.Device.NeedsRDMAFlush)
}

var _ RDMAFlusher = (*DriverDevice)(nil)

// FlushRDMA flushes the NIC's writes into the device's memory where the
// device needs it (cu.Device.NeedsRDMAFlush), and does nothing elsewhere.
// A driver without cuFlushGPUDirectRDMAWrites (before CUDA 11.3) fails
// New on such a device rather than run unordered.
func (d *DriverDevice) FlushRDMA() error {
	if !d.flush {
		return nil
	}
	return d.ctx.FlushGPUDirectRDMAWrites()
}

var _ ExportingDevice = (*DriverDevice)(nil)

// NewDriverDevice returns the device of ctx. It fails with an error
// wrapping cuda.ErrNotSupported where there is no driver or device.
func NewDriverDevice(ctx *cu.Context) (*DriverDevice, error) {
	if ctx == nil {
		return nil, fmt.Errorf("a2a cuda: nil context: %w", cu.ErrInvalidArgument)
	}
	sms, err := ctx.Device().SMCount()
	if err != nil {
		return nil, err
	}
	name, err := ctx.Device().Name()
	if err != nil {
		return nil, err
	}
	major, minor, err := ctx.Device().ComputeCapability()
	if err != nil {
		return nil, err
	}
	flush, err := ctx.Device().NeedsRDMAFlush()
	if err != nil {
		return nil, err
	}
	d := &DriverDevice{ctx: ctx, sms: sms, name: name, major: major, minor: minor, flush: flush}
	if err := d.FlushRDMA(); err != nil {
		return nil, fmt.Errorf("a2a cuda: %s needs GPUDirect RDMA writes flushed: %w", name, err)
	}
	return d, nil
}

// ArchDefines are the defines a build for compute capability major.minor
// adds to a kernel source's own: A2A_NC_PEER_LOADS (transport rows that
// peers and the NIC write during a launch read through the non-coherent
// path) on 9.0 only, where it is known to hold; every other architecture
// reads them with ordinary loads.
func ArchDefines(major, minor int) []string {
	if major == 9 && minor == 0 {
		return []string{"-DA2A_NC_PEER_LOADS=1"}
	}
	return nil
}

// Context is the CUDA context the device runs in.
func (d *DriverDevice) Context() *cu.Context { return d.ctx }

func (d *DriverDevice) Name() string { return fmt.Sprintf("cuda %s (%d SMs)", d.name, d.sms) }

// Load compiles every build with NVRTC for the device (or takes it from
// the kernel cache) and loads the modules as one program.
func (d *DriverDevice) Load(ctx context.Context, builds []Build) (_ Program, err error) {
	p := &driverProgram{d: d}
	defer func() {
		if err != nil {
			_ = p.Close()
		}
	}()
	for _, b := range builds {
		defines := append(append([]string(nil), b.Defines...), ArchDefines(d.major, d.minor)...)
		m, _, err := d.ctx.CompileModule(cu.Source{Name: b.Source.Name, Code: b.Source.Code}, cu.CompileOptions{Options: defines})
		if err != nil {
			return nil, err
		}
		p.mods = append(p.mods, m)
		for _, name := range b.Kernels {
			f, err := m.Function(name)
			if err != nil {
				return nil, err
			}
			p.table.Add(name, f)
		}
	}
	return p, nil
}

// driverProgram is loaded CUDA modules and their functions.
type driverProgram struct {
	d     *DriverDevice
	mods  []*cu.Module
	table KernelTable[*cu.Function]
}

func (p *driverProgram) Kernel(name string) (Kernel, error) { return p.table.Kernel(name) }

func (p *driverProgram) NewStream() (Stream, error) {
	st, err := p.d.ctx.NewStream(true)
	if err != nil {
		return nil, err
	}
	return driverStream{st: st, p: p}, nil
}

// MaxResidentBlocks is the kernel's occupancy per SM times the SMs.
func (p *driverProgram) MaxResidentBlocks(k Kernel, block int) (int, error) {
	f, err := p.table.Get(k)
	if err != nil {
		return 0, err
	}
	n, err := f.MaxActiveBlocksPerSM(block, 0)
	return n * p.d.sms, err
}

func (p *driverProgram) Close() error {
	var errs []error
	for _, m := range p.mods {
		errs = append(errs, m.Close())
	}
	p.mods = nil
	return errors.Join(errs...)
}

type driverStream struct {
	st *cu.Stream
	p  *driverProgram
}

func (s driverStream) Launch(k Kernel, grid, block int, args ...any) error {
	f, err := s.p.table.Get(k)
	if err != nil {
		return err
	}
	return f.Launch(cu.LaunchConfig{Grid: cu.Dim3{X: uint32(grid)}, Block: cu.Dim3{X: uint32(block)}, Stream: s.st,
		Cooperative: true}, args...)
}

func (s driverStream) Sync(ctx context.Context) error { return s.st.SynchronizeContext(ctx) }

// CUDAStream is the driver stream, for capturing launches into a graph.
func (s driverStream) CUDAStream() *cu.Stream { return s.st }
func (s driverStream) Close() error           { return s.st.Close() }

type driverMemory struct{ m *cu.DeviceMemory }

func (m driverMemory) Addr() uint64  { return uint64(m.m.Ptr()) }
func (m driverMemory) Bytes() []byte { return nil }
func (m driverMemory) Free() error   { return m.m.Close() }

type mappedMemory struct {
	h   *cu.HostMemory
	dev cu.DevicePtr
}

func (m mappedMemory) Addr() uint64  { return uint64(m.dev) }
func (m mappedMemory) Bytes() []byte { return m.h.Bytes() }
func (m mappedMemory) Free() error   { return m.h.Close() }

func (d *DriverDevice) Alloc(n int) (Memory, error) {
	m, err := d.ctx.Alloc(uint64(n))
	if err != nil {
		return nil, err
	}
	if err := m.Memset(0); err != nil {
		_ = m.Close()
		return nil, err
	}
	return driverMemory{m}, nil
}

func (d *DriverDevice) AllocMapped(n int) (Memory, error) {
	h, err := d.ctx.AllocHost(uint64(n), cu.HostPortable|cu.HostMapped)
	if err != nil {
		return nil, err
	}
	clear(h.Bytes())
	p, err := h.DevicePtr()
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	return mappedMemory{h: h, dev: p}, nil
}

func (d *DriverDevice) Upload(dst uint64, b []byte) error {
	return d.ctx.CopyHtoD(cu.DevicePtr(dst), b)
}

func (d *DriverDevice) Download(b []byte, src uint64) error {
	return d.ctx.CopyDtoH(b, cu.DevicePtr(src))
}

func (d *DriverDevice) HostAddressable() bool { return false }

// Register registers device memory as GPU memory (fabric/gpu), and
// mapped host memory (NewMappedLocalNode) as host memory.
func (d *DriverDevice) Register(e *fabric.Engine, addr uint64, n int, access fabric.Access) (*fabric.MemoryRegion, error) {
	if info, err := cu.LookupPointer(uintptr(addr)); err == nil && info.Type == cu.MemoryHost {
		return e.Register(fabric.MemorySpan{Addr: uintptr(addr), Len: uint64(n), Device: fabric.HostDevice, DmabufFD: -1}, access)
	}
	return gpu.Register(e, uintptr(addr), uint64(n), access)
}

func (d *DriverDevice) EngineDevice() fabric.Device { return gpu.DeviceOf(d.ctx.Device()) }

var _ ResidentDevice = (*DriverDevice)(nil)
var _ ControlDevice = (*DriverDevice)(nil)

// AllocControl places the control block in GDRCopy-mapped device memory
// where GDRCopy is present, in host-mapped memory otherwise
// (cuda.FlagAuto).
func (d *DriverDevice) AllocControl(n int) (Control, error) {
	f, err := d.ctx.NewFlags((n+cu.FlagBytes-1)/cu.FlagBytes, cu.FlagAuto)
	if err != nil {
		return nil, err
	}
	return flagControl{f}, nil
}

// flagControl is a control block of cuda.Flags.
type flagControl struct{ f *cu.Flags }

func (c flagControl) Addr() uint64             { return uint64(c.f.Flag(0).DevicePtr()) }
func (c flagControl) Word(off int) ControlWord { return flagWord{c.f.Word(off)} }
func (c flagControl) Kind() string             { return c.f.Kind().String() }
func (c flagControl) Free() error              { return c.f.Close() }

type flagWord struct{ f cu.Flag }

func (w flagWord) Load() uint32   { return w.f.Load() }
func (w flagWord) Store(v uint32) { w.f.Set(v) }

// Key is the device's PCI address.
func (d *DriverDevice) Key() string {
	id, err := d.ctx.Device().PCIBusID()
	if err != nil {
		return d.name
	}
	return id
}

// DefaultLaunch is one block of GPUThreads per SM.
func (d *DriverDevice) DefaultLaunch() (grid, block int) { return d.sms, GPUThreads }

// AllocExportable allocates with CUDA VMM, exportable as a POSIX file
// descriptor (and GPUDirect RDMA capable where the device can make such
// VMM memory, so that the engine may register it), mapped for this
// device and zeroed.
func (d *DriverDevice) AllocExportable(n int) (ExportableMemory, error) {
	rdma, err := d.ctx.Device().Attribute(cu.AttrGPUDirectRDMAWithVMM)
	if err != nil {
		return nil, err
	}
	m, err := d.ctx.AllocVMM(uint64(n), cu.VMMOptions{Exportable: true, GPUDirectRDMA: rdma != 0})
	if err != nil {
		return nil, err
	}
	if err := m.Memset(0); err != nil {
		_ = m.Close()
		return nil, err
	}
	return vmmMemory{driverMemory{m}}, nil
}

// Import maps a VMM allocation another process exported into this
// context, with read and write access for this device.
func (d *DriverDevice) Import(fd, size int) (Memory, error) {
	m, err := d.ctx.ImportVMM(fd, uint64(size))
	if err != nil {
		return nil, err
	}
	return driverMemory{m}, nil
}

type vmmMemory struct{ driverMemory }

func (m vmmMemory) Size() int            { return int(m.m.Size()) }
func (m vmmMemory) Export() (int, error) { return m.m.ExportFD() }
