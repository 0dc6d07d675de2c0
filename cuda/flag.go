package cuda

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ferryrdma/ferry/internal/cudadrv"
)

// FlagKind says where flags live.
type FlagKind int

const (
	// FlagAuto picks FlagGDR when GDRCopy and its gdrdrv module are
	// present, else FlagHostMapped. Flags.Kind tells which was chosen.
	FlagAuto FlagKind = iota
	// FlagHostMapped: pinned host memory mapped into the device. The CPU
	// writes at cache speed; the kernel's spin reads cross the bus.
	FlagHostMapped
	// FlagGDR: device memory that the CPU writes through a GDRCopy BAR
	// mapping. The kernel spins on local memory: lowest wake-up latency.
	FlagGDR
)

func (k FlagKind) String() string {
	switch k {
	case FlagAuto:
		return "auto"
	case FlagHostMapped:
		return "host-mapped"
	case FlagGDR:
		return "gdrcopy"
	}
	return fmt.Sprintf("FlagKind(%d)", int(k))
}

const (
	flagStride = 128      // bytes between flags: no two share a cache line
	gpuPage    = 64 << 10 // GDRCopy pins and maps whole 64 KiB GPU pages
)

// Flags is an array of 32-bit flags that the CPU sets and kernels spin on
// (and the reverse): the GPU-flag mode of the engine's immediate counters
// and the worker/kernel handshakes of a2a. Both kinds have the same
// interface. Flags are zero when allocated. Close frees them; no kernel
// may still use them then.
type Flags struct {
	ctx  *Context
	kind FlagKind
	n    int
	host unsafe.Pointer // CPU view of flag 0
	dev  DevicePtr      // device address of flag 0

	hostMem *HostMemory
	devMem  *DeviceMemory
	gdr     cudadrv.GDR
	gh      cudadrv.GDRHandle
	mh      cudadrv.GDRMemHandle
	mapSize uint64

	mu     sync.Mutex
	closed bool
}

// NewFlags allocates n flags of the given kind. FlagGDR fails with
// ErrNotSupported where GDRCopy or gdrdrv is missing; FlagAuto then falls
// back to FlagHostMapped (check Kind: the fallback is reported, not
// silent).
func (c *Context) NewFlags(n int, kind FlagKind) (*Flags, error) {
	if _, err := c.use("new flags"); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, invalid("new flags", "count %d", n)
	}
	size := uint64(n) * flagStride
	switch kind {
	case FlagHostMapped:
		return c.newHostFlags(n, size)
	case FlagGDR:
		return c.newGDRFlags(n, size)
	case FlagAuto:
		f, err := c.newGDRFlags(n, size)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, ErrNotSupported) {
			return nil, err
		}
		return c.newHostFlags(n, size)
	}
	return nil, invalid("new flags", "unknown kind %d", int(kind))
}

func (c *Context) newHostFlags(n int, size uint64) (*Flags, error) {
	h, err := c.AllocHost(size, HostPortable|HostMapped)
	if err != nil {
		return nil, err
	}
	dp, _ := h.DevicePtr()
	return &Flags{ctx: c, kind: FlagHostMapped, n: n, host: h.Pointer(), dev: dp, hostMem: h}, nil
}

// gdrdrvPath is the device node of GDRCopy's kernel module (a variable so
// that tests can point it at a stand-in).
var gdrdrvPath = "/dev/gdrdrv"

// GDRAvailable reports whether FlagGDR can work here: nil, or an error
// wrapping ErrNotSupported that says what is missing.
func GDRAvailable() error {
	if _, err := os.Stat(gdrdrvPath); err != nil {
		return fmt.Errorf("cuda: gdrcopy: gdrdrv module not loaded (%v): %w", err, ErrNotSupported)
	}
	_, err := loadGDR()
	return err
}

func (c *Context) newGDRFlags(n int, size uint64) (*Flags, error) {
	if err := GDRAvailable(); err != nil {
		return nil, err
	}
	g, err := loadGDR()
	if err != nil {
		return nil, err
	}
	s := c.s
	mapSize := roundUp(size, gpuPage)
	// Over-allocate by one GPU page so the pinned range can start on a
	// page boundary: the mapping then starts exactly at flag 0.
	mem, err := c.Alloc(mapSize + gpuPage)
	if err != nil {
		return nil, err
	}
	if err := mem.Memset(0); err != nil {
		mem.Close()
		return nil, err
	}
	aligned := DevicePtr(roundUp(uint64(mem.Ptr()), gpuPage))
	// Make driver copies to this memory synchronous with respect to the
	// BAR mapping, as GDRCopy asks; a driver without the call is fine.
	s.d.PointerSetAttribute(c.h, cudadrv.PointerAttrSyncMemops, 1, cudadrv.DevicePtr(aligned))
	gh, ok := g.Open()
	if !ok {
		mem.Close()
		return nil, fmt.Errorf("cuda: gdrcopy: gdr_open failed: %w", ErrNotSupported)
	}
	mh, rc := g.PinBuffer(gh, uint64(aligned), mapSize)
	if rc != 0 {
		g.Close(gh)
		mem.Close()
		return nil, fmt.Errorf("cuda: gdrcopy: gdr_pin_buffer: errno %d: %w", rc, ErrNotSupported)
	}
	va, rc := g.Map(gh, mh, mapSize)
	if rc != 0 || va == nil {
		g.UnpinBuffer(gh, mh)
		g.Close(gh)
		mem.Close()
		return nil, fmt.Errorf("cuda: gdrcopy: gdr_map: errno %d: %w", rc, ErrNotSupported)
	}
	return &Flags{ctx: c, kind: FlagGDR, n: n, host: va, dev: aligned, devMem: mem,
		gdr: g, gh: gh, mh: mh, mapSize: mapSize}, nil
}

// Kind returns FlagHostMapped or FlagGDR.
func (f *Flags) Kind() FlagKind { return f.kind }

// Len returns the number of flags.
func (f *Flags) Len() int { return f.n }

// Flag returns flag i, or the zero Flag when i is out of range.
func (f *Flags) Flag(i int) Flag {
	if f == nil || i < 0 || i >= f.n {
		return Flag{}
	}
	fl := Flag{p: unsafe.Add(f.host, i*flagStride), dev: f.dev + DevicePtr(i*flagStride)}
	if f.kind == FlagGDR {
		fl.mmio = f.gdr
	}
	return fl
}

// Word returns the 32-bit word at byte offset off of the flags' memory
// (a multiple of 4 below Len()*128), as a Flag: for callers that lay out
// their own words in it, several to a cache line (a2a's control block).
// It returns the zero Flag for an offset out of range.
func (f *Flags) Word(off int) Flag {
	if f == nil || off < 0 || off%4 != 0 || off >= f.n*flagStride {
		return Flag{}
	}
	fl := Flag{p: unsafe.Add(f.host, off), dev: f.dev + DevicePtr(off)}
	if f.kind == FlagGDR {
		fl.mmio = f.gdr
	}
	return fl
}

// FlagBytes is the memory of n flags: NewFlags(n, ...) holds
// n*FlagBytes bytes that Word addresses.
const FlagBytes = flagStride

// Close frees the flags. Closing twice is a no-op.
func (f *Flags) Close() error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	if f.kind == FlagHostMapped {
		return f.hostMem.Close()
	}
	var errs []error
	if rc := f.gdr.Unmap(f.gh, f.mh, f.host, f.mapSize); rc != 0 {
		errs = append(errs, fmt.Errorf("cuda: gdr_unmap: errno %d", rc))
	}
	if rc := f.gdr.UnpinBuffer(f.gh, f.mh); rc != 0 {
		errs = append(errs, fmt.Errorf("cuda: gdr_unpin_buffer: errno %d", rc))
	}
	if rc := f.gdr.Close(f.gh); rc != 0 {
		errs = append(errs, fmt.Errorf("cuda: gdr_close: errno %d", rc))
	}
	errs = append(errs, f.devMem.Close())
	return errors.Join(errs...)
}

// Flag is one 32-bit flag: a small value, safe to copy and to use from any
// goroutine. The zero Flag is invalid: Set does nothing and Load returns 0.
type Flag struct {
	p    unsafe.Pointer
	dev  DevicePtr
	mmio cudadrv.GDR // non-nil for GDRCopy mappings
}

// IsZero reports whether f is the zero (invalid) Flag.
func (f Flag) IsZero() bool { return f.p == nil }

// Set stores v with release ordering: writes the CPU made before Set are
// visible to a kernel that observes v.
func (f Flag) Set(v uint32) {
	switch {
	case f.p == nil:
	case f.mmio != nil:
		f.mmio.Store32(f.p, v)
	default:
		(*atomic.Uint32)(f.p).Store(v)
	}
}

// Load reads the flag with acquire ordering.
func (f Flag) Load() uint32 {
	switch {
	case f.p == nil:
		return 0
	case f.mmio != nil:
		return f.mmio.Load32(f.p)
	default:
		return (*atomic.Uint32)(f.p).Load()
	}
}

// DevicePtr is the address a kernel spins on (a const unsigned int*; use
// ld.acquire.sys loads, as kernels/flags.cu does).
func (f Flag) DevicePtr() DevicePtr { return f.dev }

// Wait spins until the flag equals want (set by a kernel or another
// thread), backing off to short sleeps, or until ctx ends (ErrTimeout).
func (f Flag) Wait(ctx context.Context, want uint32) error {
	if f.p == nil {
		return invalid("flag wait", "zero Flag")
	}
	return pollUntil(ctx, "flag wait", func() (bool, error) { return f.Load() == want, nil })
}
