package gpu

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
)

// Path says how GPU memory was handed to the NICs.
type Path uint8

const (
	// PathDmabuf: the NICs imported a dma-buf fd of the range (Linux >=
	// 5.12, a driver and NIC stack that export and import dma-bufs). No
	// out-of-tree kernel module is involved.
	PathDmabuf Path = iota + 1
	// PathPeerMemory: the NICs registered the device address itself, which
	// needs the provider's own CUDA support (libfabric FI_HMEM, or
	// nvidia-peermem under verbs).
	PathPeerMemory
)

func (p Path) String() string {
	switch p {
	case PathDmabuf:
		return "dma-buf"
	case PathPeerMemory:
		return "peer-memory"
	}
	return "none"
}

// Registration reports what Register did.
type Registration struct {
	Region *fabric.MemoryRegion
	Device fabric.Device // the device owning the memory
	Path   Path
	// DmabufErr says why the dma-buf path was not taken; nil when it was.
	// A provider may still fall back inside its own registration (verbs
	// counts those in its domain statistics).
	DmabufErr error
}

// String describes the registration for logs and fabric-debug.
func (r Registration) String() string {
	s := r.Device.String() + " " + r.Path.String()
	if r.DmabufErr != nil {
		s += " (no dma-buf: " + r.DmabufErr.Error() + ")"
	}
	return s
}

// RegisterOptions tune RegisterReport. The zero value is the default.
type RegisterOptions struct {
	// NoDmabuf skips the dma-buf path (for stacks whose dma-buf import is
	// known to be broken).
	NoDmabuf bool
}

// driverOps is the part of the CUDA driver registration uses. Tests swap
// it to take every path on machines without a GPU.
type driverOps struct {
	lookup    func(ptr uintptr) (cuda.PointerInfo, error)
	dmabuf    func(ptr uintptr, n uint64) (cuda.DmaBuf, error)
	osRelease func() (string, error)
	pageSize  int
}

var drv = driverOps{
	lookup:    cuda.LookupPointer,
	dmabuf:    cuda.DmabufRange,
	osRelease: readOSRelease,
	pageSize:  os.Getpagesize(),
}

// Register registers n bytes of CUDA device memory at ptr with the NICs of
// the engine group serving its device (the engine needs a group for that
// CUDA ordinal). See RegisterReport for the paths tried and the errors.
func Register(e *fabric.Engine, ptr uintptr, n uint64, access fabric.Access) (*fabric.MemoryRegion, error) {
	r, err := RegisterReport(e, ptr, n, access, RegisterOptions{})
	return r.Region, err
}

// RegisterDeviceMemory registers all of m.
func RegisterDeviceMemory(e *fabric.Engine, m *cuda.DeviceMemory, access fabric.Access) (*fabric.MemoryRegion, error) {
	if m == nil {
		return nil, invalid("register device memory: nil memory")
	}
	return Register(e, uintptr(m.Ptr()), m.Size(), access)
}

// RegisterReport registers [ptr, ptr+n) of CUDA device memory and reports
// the path taken. The driver must know both ends of the range as device
// memory of one device (else a *MemoryTypeError). On Linux >= 5.12 it asks
// the driver for a dma-buf fd of the range and registers through it,
// closing the fd afterwards (the NIC registrations keep their own
// references); when there is no dma-buf, or the registration through it
// fails, it registers the address itself (PathPeerMemory) and records why
// in Registration.DmabufErr. When neither works the error says both
// reasons; a provider without GPU support (libfabric tcp or shm, the
// in-memory providers) gives an error wrapping fabric.ErrNotSupported.
// Errors of the engine itself (ErrClosed, ErrInvalidArgument) are returned
// at once. Nothing leaks on failure.
func RegisterReport(e *fabric.Engine, ptr uintptr, n uint64, access fabric.Access, opts RegisterOptions) (Registration, error) {
	var reg Registration
	if e == nil {
		return reg, invalid("register: nil engine")
	}
	if ptr == 0 || n == 0 || ptr+uintptr(n) < ptr {
		return reg, invalid("register [%#x, +%d)", ptr, n)
	}
	ord, err := deviceOf(ptr, n)
	if err != nil {
		return reg, err
	}
	reg.Device = fabric.CUDADevice(ord)
	span := fabric.MemorySpan{Addr: ptr, Len: n, Device: reg.Device, DmabufFD: -1}

	buf, derr := openDmabuf(ptr, n, opts)
	if derr == nil {
		span.DmabufFD, span.DmabufOffset = buf.FD, buf.Offset
		r, err := e.Register(span, access)
		// Every NIC registration took its own reference to the dma-buf;
		// closing ours cannot affect them.
		_ = buf.Close()
		if err == nil {
			reg.Region, reg.Path = r, PathDmabuf
			return reg, nil
		}
		if errors.Is(err, fabric.ErrClosed) || errors.Is(err, fabric.ErrInvalidArgument) {
			return reg, fmt.Errorf("gpu: register %s memory %#x+%d: %w", reg.Device, ptr, n, err)
		}
		derr = fmt.Errorf("registration through the dma-buf failed: %w", err)
		span.DmabufFD, span.DmabufOffset = -1, 0
	}
	reg.DmabufErr = derr
	r, err := e.Register(span, access)
	if err != nil {
		return reg, fmt.Errorf("gpu: register %s memory %#x+%d by address (dma-buf not used: %v): %w",
			reg.Device, ptr, n, derr, err)
	}
	reg.Region, reg.Path = r, PathPeerMemory
	return reg, nil
}

// deviceOf returns the ordinal of the device owning both ends of the range.
func deviceOf(ptr uintptr, n uint64) (int, error) {
	first, err := lookupDevice(ptr)
	if err != nil {
		return 0, err
	}
	if n == 1 {
		return first, nil
	}
	last, err := lookupDevice(ptr + uintptr(n) - 1)
	if err != nil {
		return 0, fmt.Errorf("gpu: range %#x+%d runs past its allocation: %w", ptr, n, err)
	}
	if last != first {
		return 0, invalid("range %#x+%d spans cuda:%d and cuda:%d", ptr, n, first, last)
	}
	return first, nil
}

func lookupDevice(addr uintptr) (int, error) {
	info, err := drv.lookup(addr)
	if err != nil {
		if errors.Is(err, cuda.ErrInvalidArgument) && !errors.Is(err, cuda.ErrNotSupported) {
			// The driver does not know the address: plain host memory.
			return 0, &MemoryTypeError{Addr: addr, Type: cuda.MemoryUnknown, Err: err}
		}
		return 0, fmt.Errorf("gpu: look up %#x: %w", addr, err)
	}
	if info.Type != cuda.MemoryDevice {
		return 0, &MemoryTypeError{Addr: addr, Type: info.Type}
	}
	return info.Device, nil
}

// providersTakeDmabufOffset says whether the providers pass
// MemorySpan.DmabufOffset to the NIC. The libfabric and verbs shims of this
// tree still register a dma-buf from offset 0, which for a range that does
// not start on a page would map the wrong bytes; such ranges therefore use
// the peer-memory path until the shims pass the offset.
const providersTakeDmabufOffset = false

// openDmabuf returns a dma-buf covering the range, or why there is none.
func openDmabuf(ptr uintptr, n uint64, opts RegisterOptions) (cuda.DmaBuf, error) {
	none := cuda.DmaBuf{FD: -1}
	if opts.NoDmabuf {
		return none, errors.New("disabled by RegisterOptions.NoDmabuf")
	}
	if err := kernelDmabuf(); err != nil {
		return none, err
	}
	if !providersTakeDmabufOffset && ptr%uintptr(drv.pageSize) != 0 {
		return none, fmt.Errorf("%#x does not start on a page and the providers register dma-bufs from offset 0: %w",
			ptr, fabric.ErrNotSupported)
	}
	buf, err := drv.dmabuf(ptr, n)
	if err != nil {
		return none, err
	}
	if buf.FD < 0 {
		return none, fmt.Errorf("driver returned dma-buf fd %d: %w", buf.FD, fabric.ErrNotSupported)
	}
	return buf, nil
}

// kernelDmabuf returns nil when the kernel can import dma-bufs into RDMA
// registrations (Linux 5.12 added it), else why not.
func kernelDmabuf() error {
	rel, err := drv.osRelease()
	if err != nil {
		return fmt.Errorf("kernel version unknown (%v): %w", err, fabric.ErrNotSupported)
	}
	major, minor, ok := parseRelease(rel)
	if !ok {
		return fmt.Errorf("kernel version %q not understood: %w", rel, fabric.ErrNotSupported)
	}
	if major < 5 || major == 5 && minor < 12 {
		return fmt.Errorf("linux %s has no dma-buf import for rdma (needs 5.12): %w", rel, fabric.ErrNotSupported)
	}
	return nil
}

func readOSRelease() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b)), err
}

// parseRelease reads "major.minor" from the front of a kernel release such
// as "6.1.0-18-amd64".
func parseRelease(s string) (major, minor int, ok bool) {
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	digits := func(p string) (int, bool) {
		end := 0
		for end < len(p) && p[end] >= '0' && p[end] <= '9' {
			end++
		}
		v, err := strconv.Atoi(p[:end])
		return v, err == nil
	}
	major, ok1 := digits(parts[0])
	minor, ok2 := digits(parts[1])
	return major, minor, ok1 && ok2
}

// DmabufAvailable reports whether GPU memory of CUDA device ordinal can be
// registered through dma-buf here: nil, or an error wrapping
// fabric.ErrNotSupported that says what is missing (kernel, driver,
// device). Other errors are inconclusive. fabric-debug info prints it.
func DmabufAvailable(ordinal int) error {
	if err := kernelDmabuf(); err != nil {
		return fmt.Errorf("gpu: dma-buf: %w", err)
	}
	dev, err := cuda.GetDevice(ordinal)
	if err != nil {
		return fmt.Errorf("gpu: dma-buf: %w", err)
	}
	v, err := dev.Attribute(cuda.AttrDmaBufSupported)
	if err != nil {
		return fmt.Errorf("gpu: dma-buf: %w", err)
	}
	if v == 0 {
		return fmt.Errorf("gpu: dma-buf: %s driver or device cannot export dma-bufs: %w", dev, fabric.ErrNotSupported)
	}
	return nil
}

// DeviceOf returns the engine's name for the memory of a CUDA device (the
// Device of fabric.MemorySpan and of GroupSpec for that GPU). It lives
// here, beside the other GPU-to-engine glue, so that package cuda does
// not depend on the engine.
func DeviceOf(d cuda.Device) fabric.Device { return fabric.CUDADevice(d.Ordinal()) }
