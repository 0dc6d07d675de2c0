package cuda

import (
	"fmt"

	"github.com/ferryrdma/ferry/internal/cudadrv"
)

// Device is one CUDA device, by ordinal (which respects
// CUDA_VISIBLE_DEVICES). It is a small value, safe to copy and to use
// concurrently.
type Device struct {
	ordinal int
	h       cudadrv.Device
}

// DeviceInfo is a device's description: plain data, comparable, printable.
type DeviceInfo struct {
	Ordinal       int
	Name          string
	Major, Minor  int    // compute capability
	Arch          string // NVRTC target for this device, e.g. "sm_90a"
	SMCount       int
	PCIBusID      string // "0000:19:00.0"
	TotalMemory   uint64
	Cooperative   bool // cuLaunchCooperativeKernel
	VMM           bool // cuMemCreate and friends
	PosixFDExport bool // VMM allocations exportable as POSIX fds
	GPUDirectVMM  bool // VMM allocations may ask for GPUDirect RDMA
	DmaBuf        bool // cuMemGetHandleForAddressRange(DMA_BUF_FD)
	MapHostMemory bool
}

// Attribute is a CUdevice_attribute (values from cuda.h), for attributes
// DeviceInfo does not carry.
type Attribute int32

// A few attributes by name; any other cuda.h value works too.
const (
	AttrMaxThreadsPerBlock   Attribute = Attribute(cudadrv.AttrMaxThreadsPerBlock)
	AttrMultiprocessorCount  Attribute = Attribute(cudadrv.AttrMultiprocessorCount)
	AttrCooperativeLaunch    Attribute = Attribute(cudadrv.AttrCooperativeLaunch)
	AttrGPUDirectRDMA        Attribute = Attribute(cudadrv.AttrGPUDirectRDMA)
	AttrGPUDirectRDMAWithVMM Attribute = Attribute(cudadrv.AttrGPUDirectRDMAWithVMM)
	AttrDmaBufSupported      Attribute = Attribute(cudadrv.AttrDmaBufSupported)
)

// DeviceCount returns the number of visible CUDA devices.
func DeviceCount() (int, error) {
	s, err := driver()
	if err != nil {
		return 0, err
	}
	n, r := s.d.DeviceGetCount()
	return n, s.check("cuDeviceGetCount", r)
}

// GetDevice returns the device with the given ordinal.
func GetDevice(ordinal int) (Device, error) {
	s, err := driver()
	if err != nil {
		return Device{}, err
	}
	n, r := s.d.DeviceGetCount()
	if err := s.check("cuDeviceGetCount", r); err != nil {
		return Device{}, err
	}
	if ordinal < 0 || ordinal >= n {
		return Device{}, invalid("get device", "ordinal %d of %d devices", ordinal, n)
	}
	h, r := s.d.DeviceGet(ordinal)
	if err := s.check("cuDeviceGet", r); err != nil {
		return Device{}, err
	}
	return Device{ordinal: ordinal, h: h}, nil
}

// Devices returns every visible device.
func Devices() ([]Device, error) {
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	out := make([]Device, 0, n)
	for i := range n {
		d, err := GetDevice(i)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Ordinal returns the device's ordinal.
func (d Device) Ordinal() int { return d.ordinal }

// String returns "cuda:N".
func (d Device) String() string { return fmt.Sprintf("cuda:%d", d.ordinal) }

// Attribute returns one device attribute.
func (d Device) Attribute(a Attribute) (int, error) {
	s, err := driver()
	if err != nil {
		return 0, err
	}
	v, r := s.d.DeviceGetAttribute(cudadrv.Attribute(a), d.h)
	return v, s.check("cuDeviceGetAttribute", r)
}

// Name returns the device's marketing name.
func (d Device) Name() (string, error) {
	s, err := driver()
	if err != nil {
		return "", err
	}
	n, r := s.d.DeviceGetName(d.h)
	return n, s.check("cuDeviceGetName", r)
}

// ComputeCapability returns the major and minor compute capability.
func (d Device) ComputeCapability() (major, minor int, err error) {
	if major, err = d.Attribute(Attribute(cudadrv.AttrComputeCapabilityMajor)); err != nil {
		return 0, 0, err
	}
	minor, err = d.Attribute(Attribute(cudadrv.AttrComputeCapabilityMinor))
	return major, minor, err
}

// SMCount returns the number of streaming multiprocessors.
func (d Device) SMCount() (int, error) { return d.Attribute(AttrMultiprocessorCount) }

// PCIBusID returns the device's PCI address, "dddd:bb:dd.f".
func (d Device) PCIBusID() (string, error) {
	s, err := driver()
	if err != nil {
		return "", err
	}
	id, r := s.d.DeviceGetPCIBusID(d.h)
	return id, s.check("cuDeviceGetPCIBusId", r)
}

// CanAccessPeer reports whether this device can map peer's memory.
func (d Device) CanAccessPeer(peer Device) (bool, error) {
	s, err := driver()
	if err != nil {
		return false, err
	}
	ok, r := s.d.DeviceCanAccessPeer(d.h, peer.h)
	return ok, s.check("cuDeviceCanAccessPeer", r)
}

// Info gathers the device's description in one call.
func (d Device) Info() (DeviceInfo, error) {
	s, err := driver()
	if err != nil {
		return DeviceInfo{}, err
	}
	info := DeviceInfo{Ordinal: d.ordinal}
	if info.Name, err = d.Name(); err != nil {
		return info, err
	}
	if info.PCIBusID, err = d.PCIBusID(); err != nil {
		return info, err
	}
	total, r := s.d.DeviceTotalMem(d.h)
	if err := s.check("cuDeviceTotalMem", r); err != nil {
		return info, err
	}
	info.TotalMemory = total
	ints := []struct {
		a cudadrv.Attribute
		p *int
	}{
		{cudadrv.AttrComputeCapabilityMajor, &info.Major},
		{cudadrv.AttrComputeCapabilityMinor, &info.Minor},
		{cudadrv.AttrMultiprocessorCount, &info.SMCount},
	}
	for _, x := range ints {
		if *x.p, err = d.Attribute(Attribute(x.a)); err != nil {
			return info, err
		}
	}
	// Flags an older driver may not know read as false.
	flags := []struct {
		a cudadrv.Attribute
		p *bool
	}{
		{cudadrv.AttrCooperativeLaunch, &info.Cooperative},
		{cudadrv.AttrVirtualMemoryManagement, &info.VMM},
		{cudadrv.AttrHandleTypePosixFD, &info.PosixFDExport},
		{cudadrv.AttrGPUDirectRDMAWithVMM, &info.GPUDirectVMM},
		{cudadrv.AttrDmaBufSupported, &info.DmaBuf},
		{cudadrv.AttrCanMapHostMemory, &info.MapHostMemory},
	}
	for _, x := range flags {
		v, err := d.Attribute(Attribute(x.a))
		*x.p = err == nil && v != 0
	}
	info.Arch = ArchFor(info.Major, info.Minor)
	return info, nil
}

// ArchFor returns the NVRTC target for a compute capability: the
// architecture-specific "a" variant (sm_90a, sm_100a, ...) from Hopper on,
// so kernels may use every feature of the exact device, else sm_XY.
func ArchFor(major, minor int) string {
	arch := fmt.Sprintf("sm_%d%d", major, minor)
	if major >= 9 {
		arch += "a"
	}
	return arch
}

// NeedsRDMAFlush reports whether a NIC's writes into this device's memory
// may become visible to kernels after a flag the CPU raises on the NIC's
// completion, so that the CPU must flush them first
// (Context.FlushGPUDirectRDMAWrites). The rule is the one NCCL follows:
// GPUs below compute capability 9.0 (PCIe write ordering into GPU memory
// is not guaranteed there), and GPUs on a coherent C2C link to the CPU
// (host native atomics, Grace Hopper) whatever their generation; only
// where the device offers the host-side flush (its flush options
// attribute, bit 0).
func (d Device) NeedsRDMAFlush() (bool, error) {
	major, _, err := d.ComputeCapability()
	if err != nil {
		return false, err
	}
	c2c, err := d.Attribute(Attribute(cudadrv.AttrHostNativeAtomicSupported))
	if err != nil {
		return false, err
	}
	if major >= 9 && c2c == 0 {
		return false, nil
	}
	opts, err := d.Attribute(Attribute(cudadrv.AttrGPUDirectRDMAFlushWritesOptions))
	if err != nil {
		return false, err
	}
	return opts&1 != 0, nil
}
