package cuda

import (
	"fmt"

	"github.com/ferryrdma/ferry/internal/cudadrv"
)

// MemoryType is what an address points to.
type MemoryType int

// Memory types (CU_MEMORYTYPE_*).
const (
	MemoryUnknown MemoryType = 0
	MemoryHost    MemoryType = cudadrv.MemoryTypeHost
	MemoryDevice  MemoryType = cudadrv.MemoryTypeDevice
	MemoryArray   MemoryType = cudadrv.MemoryTypeArray
	MemoryUnified MemoryType = cudadrv.MemoryTypeUnified
)

func (t MemoryType) String() string {
	switch t {
	case MemoryHost:
		return "host"
	case MemoryDevice:
		return "device"
	case MemoryArray:
		return "array"
	case MemoryUnified:
		return "unified"
	}
	return "unknown"
}

// PointerInfo describes an address the driver knows.
type PointerInfo struct {
	Type   MemoryType
	Device int // ordinal of the owning device
}

// LookupPointer asks the driver what ptr points to. Memory the driver does
// not know (plain host memory) returns an *Error (CUDA_ERROR_INVALID_VALUE).
// The engine uses it to check that a span said to be GPU memory is device
// memory, and on which device.
func LookupPointer(ptr uintptr) (PointerInfo, error) {
	s, err := driver()
	if err != nil {
		return PointerInfo{}, err
	}
	t, r := s.d.PointerGetAttribute(cudadrv.PointerAttrMemoryType, cudadrv.DevicePtr(ptr))
	if err := s.check("cuPointerGetAttribute(MEMORY_TYPE)", r); err != nil {
		return PointerInfo{}, err
	}
	o, r := s.d.PointerGetAttribute(cudadrv.PointerAttrDeviceOrdinal, cudadrv.DevicePtr(ptr))
	if err := s.check("cuPointerGetAttribute(DEVICE_ORDINAL)", r); err != nil {
		return PointerInfo{}, err
	}
	return PointerInfo{Type: MemoryType(uint32(t)), Device: int(int32(uint32(o)))}, nil
}

// primaryFor returns a retained primary context of the device owning ptr.
func primaryFor(op string, ptr uintptr) (*Context, error) {
	info, err := LookupPointer(ptr)
	if err != nil {
		return nil, err
	}
	if info.Type != MemoryDevice {
		return nil, invalid(op, "%#x is %s memory, not device memory", ptr, info.Type)
	}
	dev, err := GetDevice(info.Device)
	if err != nil {
		return nil, err
	}
	return dev.PrimaryContext()
}

// DmabufRange is DmabufFD for a range that need not be page aligned (a
// tensor inside a larger allocation): see Context.DmabufRange. The caller
// closes the DmaBuf.
func DmabufRange(ptr uintptr, n uint64) (DmaBuf, error) {
	c, err := primaryFor("dma-buf", ptr)
	if err != nil {
		return DmaBuf{FD: -1}, err
	}
	defer c.Close()
	return c.DmabufRange(DevicePtr(ptr), n)
}

// DmabufFD returns a new dma-buf fd for [ptr, ptr+n) of device memory
// allocated by anyone in this process (this package, the CUDA runtime,
// PyTorch): it finds the owning device and uses its primary context. The
// caller closes the fd once its NIC registration is made. ptr and n must be
// page aligned (else use DmabufRange). Errors wrap ErrNotSupported where
// dma-buf export is unavailable, and ErrInvalidArgument for host memory or
// unaligned ranges.
func DmabufFD(ptr uintptr, n uint64) (int, error) {
	c, err := primaryFor("dma-buf", ptr)
	if err != nil {
		return -1, err
	}
	defer c.Close()
	fd, err := c.DmabufFD(DevicePtr(ptr), n)
	if err != nil {
		return -1, fmt.Errorf("cuda: dma-buf for %#x+%d on %s: %w", ptr, n, c.dev, err)
	}
	return fd, nil
}
