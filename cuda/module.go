package cuda

import (
	"sync/atomic"

	"github.com/ferryrdma/ferry/cuda/internal/kernelargs"
	"github.com/ferryrdma/ferry/internal/cudadrv"
)

// Module is loaded device code (a cubin, or PTX the driver compiles).
type Module struct {
	ctx       *Context
	h         cudadrv.Module
	fromCache bool

	resource
	funcs map[string]*Function
}

// LoadModule loads a cubin, fatbin or NUL-free PTX image.
func (c *Context) LoadModule(image []byte) (*Module, error) {
	s, err := c.use("load module")
	if err != nil {
		return nil, err
	}
	if len(image) == 0 {
		return nil, invalid("load module", "empty image")
	}
	h, r := s.d.ModuleLoadData(c.h, image)
	if err := s.check("cuModuleLoadData", r); err != nil {
		return nil, err
	}
	c.addChild()
	m := &Module{ctx: c, h: h, funcs: map[string]*Function{}}
	return track(m, &m.leak), nil
}

// FromCache reports whether the module's code came from the kernel cache
// rather than a fresh NVRTC compilation.
func (m *Module) FromCache() bool { return m.fromCache }

// Function returns the kernel called name (an extern "C" name).
func (m *Module) Function(name string) (*Function, error) {
	s, err := m.ctx.use("module function")
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, closedErr("module function")
	}
	if f, ok := m.funcs[name]; ok {
		return f, nil
	}
	h, r := s.d.ModuleGetFunction(m.ctx.h, m.h, name)
	if err := s.check("cuModuleGetFunction("+name+")", r); err != nil {
		return nil, err
	}
	f := &Function{mod: m, h: h, name: name}
	m.funcs[name] = f
	return f, nil
}

// Close unloads the module; its Functions become unusable.
func (m *Module) Close() error {
	if m == nil {
		return nil
	}
	return m.release(m.ctx, func() error {
		return m.ctx.s.check("cuModuleUnload", m.ctx.s.d.ModuleUnload(m.ctx.h, m.h))
	})
}

// Function is a kernel in a loaded module. Launches are safe for
// concurrent use.
type Function struct {
	mod  *Module
	h    cudadrv.Function
	name string
	coop atomic.Pointer[coopLimit] // the last block shape's cooperative grid limit
}

// coopLimit is how many blocks of one shape (threads, dynamic shared
// memory) a cooperative launch of the function may have.
type coopLimit struct {
	threads uint64
	smem    uint32
	perSM   int
	sms     int
}

// Name returns the kernel's name.
func (f *Function) Name() string { return f.name }

// Dim3 is a grid or block size; zero components count as 1.
type Dim3 struct{ X, Y, Z uint32 }

func (d Dim3) raw() cudadrv.Dim3 {
	one := func(v uint32) uint32 { return max(v, 1) }
	return cudadrv.Dim3{X: one(d.X), Y: one(d.Y), Z: one(d.Z)}
}

// LaunchConfig is how a kernel runs.
type LaunchConfig struct {
	Grid, Block Dim3
	SharedMem   uint32  // dynamic shared memory, bytes
	Stream      *Stream // nil: the legacy default stream
	// Cooperative launches with cuLaunchCooperativeKernel: all blocks are
	// resident at once, so grid-wide barriers are allowed. The grid must
	// fit (see MaxActiveBlocksPerSM): a larger one is refused before the
	// driver sees it, with ErrInvalidArgument and the largest grid that
	// fits (the driver's answer would be error 720).
	Cooperative bool
}

func (f *Function) use(op string) (*driverState, error) {
	if f == nil {
		return nil, invalid(op, "nil function")
	}
	f.mod.mu.Lock()
	closed := f.mod.closed
	f.mod.mu.Unlock()
	if closed {
		return nil, closedErr(op)
	}
	return f.mod.ctx.use(op)
}

// Launch queues the kernel with args, which must match the kernel's
// parameters in order and size: int8/uint8/bool (1 byte), int16/uint16,
// int32/uint32/float32, int64/uint64/int/uint/uintptr/float64, DevicePtr
// and unsafe.Pointer (8 bytes, the address), named types of those kinds,
// and structs without pointers (by value). Other types are refused with
// ErrInvalidArgument. The emulator (package cuda/emu) lays arguments out
// with the same code.
func (f *Function) Launch(cfg LaunchConfig, args ...any) error {
	s, err := f.use("launch " + f.nameOr())
	if err != nil {
		return err
	}
	c := f.mod.ctx
	st, err := cfg.Stream.handle("launch", c)
	if err != nil {
		return err
	}
	buf, offs, err := packArgs(args)
	if err != nil {
		return err
	}
	p := cudadrv.LaunchParams{
		Func: f.h, Grid: cfg.Grid.raw(), Block: cfg.Block.raw(), SharedMem: cfg.SharedMem,
		Stream: st, Args: buf, Offsets: offs, Cooperative: cfg.Cooperative,
	}
	op := "cuLaunchKernel(" + f.name + ")"
	if cfg.Cooperative {
		op = "cuLaunchCooperativeKernel(" + f.name + ")"
		if err := f.checkCooperative(op, cfg); err != nil {
			return err
		}
	}
	return s.check(op, s.d.LaunchKernel(c.h, &p))
}

// checkCooperative refuses a cooperative grid larger than the device holds
// at once (occupancy per SM times SMs), naming the size to use. The limit
// of the last block shape is kept, so repeated launches ask the driver
// nothing.
func (f *Function) checkCooperative(op string, cfg LaunchConfig) error {
	b, g := cfg.Block.raw(), cfg.Grid.raw()
	threads := uint64(b.X) * uint64(b.Y) * uint64(b.Z)
	lim := f.coop.Load()
	if lim == nil || lim.threads != threads || lim.smem != cfg.SharedMem {
		perSM, err := f.MaxActiveBlocksPerSM(int(threads), uint64(cfg.SharedMem))
		if err != nil {
			return err
		}
		sms, err := f.mod.ctx.dev.SMCount()
		if err != nil {
			return err
		}
		lim = &coopLimit{threads: threads, smem: cfg.SharedMem, perSM: perSM, sms: sms}
		f.coop.Store(lim)
	}
	blocks := uint64(g.X) * uint64(g.Y) * uint64(g.Z)
	if max := uint64(lim.perSM) * uint64(lim.sms); blocks > max {
		return invalid(op, "cooperative grid of %d blocks of %d threads: at most %d are resident at once on this device "+
			"(%d per SM x %d SMs); launch at most %d blocks", blocks, threads, max, lim.perSM, lim.sms, max)
	}
	return nil
}

func (f *Function) nameOr() string {
	if f == nil {
		return ""
	}
	return f.name
}

// MaxActiveBlocksPerSM returns how many blocks of blockSize threads (and
// sharedMem dynamic shared bytes) fit on one SM at once. A cooperative
// grid may have at most that times the SM count blocks.
func (f *Function) MaxActiveBlocksPerSM(blockSize int, sharedMem uint64) (int, error) {
	s, err := f.use("occupancy")
	if err != nil {
		return 0, err
	}
	n, r := s.d.OccupancyMaxActiveBlocksPerMultiprocessor(f.mod.ctx.h, f.h, blockSize, sharedMem)
	return n, s.check("cuOccupancyMaxActiveBlocksPerMultiprocessor", r)
}

// packArgs lays the arguments out with the launch ABI the emulator shares
// (package cuda/internal/kernelargs); the C side turns the offsets into
// the kernelParams pointer array.
func packArgs(args []any) ([]byte, []uint32, error) {
	if len(args) > cudadrv.MaxKernelArgs {
		return nil, nil, invalid("launch", "%d arguments, at most %d", len(args), cudadrv.MaxKernelArgs)
	}
	p, err := kernelargs.Pack(args)
	if err != nil {
		return nil, nil, invalid("launch", "%v", err)
	}
	return p.Buf, p.Offsets, nil
}
