package emu

import (
	"context"
	"sync"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/cuda/internal/kernelargs"
)

// Dim3 is a grid or block size; zero components count as 1.
type Dim3 = cuda.Dim3

// ScopeCheckEnv, set to 0 in the environment, turns the scope checker off
// for the process (to measure what it costs, or to run kernels known to
// break the scope rules). It is read when a module is first loaded.
const ScopeCheckEnv = "FERRY_EMU_SCOPE_CHECK"

// ChaosEnv, set to a nonzero seed in the environment, runs launches in
// chaos mode: every scoped load or read-modify-write switches to another
// CUDA thread of the block, each scheduling round takes the block's
// threads in a random order, and blocks stall now and then, so that
// decisions read from memory other blocks write interleave as badly as a
// GPU may make them. Read at each launch.
const ChaosEnv = "FERRY_EMU_CHAOS"

// Module is a built set of kernels. Safe for concurrent use.
type Module struct {
	name, path string
	sm         *sharedModule
	mu         sync.Mutex
	closed     bool
}

// Kernel is one extern "C" __global__ function of a Module.
type Kernel struct {
	m          *Module
	idx        int
	name       string
	sizes      []uint32
	maxThreads int
}

// Kernels lists the module's kernel names.
func (m *Module) Kernels() []string {
	var out []string
	for _, k := range m.sm.kernels {
		out = append(out, k.name)
	}
	return out
}

// Kernel returns the kernel called name.
func (m *Module) Kernel(name string) (*Kernel, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	for i, k := range m.sm.kernels {
		if k.name == name {
			return &Kernel{m: m, idx: i, name: name, sizes: k.sizes, maxThreads: k.maxThreads}, nil
		}
	}
	return nil, invalid("module %s has no kernel %q", m.name, name)
}

// Name returns the kernel's name.
func (k *Kernel) Name() string { return k.name }

// MaxThreads returns the kernel's __launch_bounds__ thread count (0:
// none); larger blocks are refused, as on a GPU.
func (k *Kernel) MaxThreads() int { return k.maxThreads }

// ParamSizes returns the sizes of the kernel's parameters in bytes.
func (k *Kernel) ParamSizes() []uint32 { return append([]uint32(nil), k.sizes...) }

type launchReq struct {
	k           *Kernel
	grid, block Dim3
	shared      int
	args        []byte
	offsets     []uint32
	device      uint32 // the stream's emulated device
	done        chan struct{}
	err         error
}

// maxBlocksPerLaunch bounds a grid: every block runs on its own OS thread.
const maxBlocksPerLaunch = 1024

func one(v uint32) uint32 { return max(v, 1) }

// newLaunch checks a launch against the kernel and packs its arguments.
func newLaunch(k *Kernel, grid, block Dim3, shared int, args []any) (*launchReq, error) {
	if k == nil {
		return nil, invalid("launch: nil kernel")
	}
	grid = Dim3{X: one(grid.X), Y: one(grid.Y), Z: one(grid.Z)}
	block = Dim3{X: one(block.X), Y: one(block.Y), Z: one(block.Z)}
	threads := uint64(block.X) * uint64(block.Y) * uint64(block.Z)
	blocks := uint64(grid.X) * uint64(grid.Y) * uint64(grid.Z)
	switch {
	case threads > 1024:
		return nil, invalid("launch %s: %d threads per block, at most 1024", k.name, threads)
	case k.maxThreads > 0 && threads > uint64(k.maxThreads):
		return nil, invalid("launch %s: %d threads per block, its __launch_bounds__ allow %d", k.name, threads, k.maxThreads)
	case blocks > maxBlocksPerLaunch:
		return nil, invalid("launch %s: %d blocks, the emulator runs at most %d at once", k.name, blocks, maxBlocksPerLaunch)
	case shared < 0 || shared > 227<<10:
		return nil, invalid("launch %s: %d bytes of dynamic shared memory", k.name, shared)
	case len(args) != len(k.sizes):
		return nil, invalid("launch %s: %d arguments, the kernel takes %d", k.name, len(args), len(k.sizes))
	}
	buf, offs, err := packArgs(k, args)
	if err != nil {
		return nil, err
	}
	return &launchReq{k: k, grid: grid, block: block, shared: shared, args: buf, offsets: offs, done: make(chan struct{})}, nil
}

// packArgs lays the arguments out with the launch ABI the driver path
// shares (package cuda/internal/kernelargs) and checks every size against
// the kernel's parameter.
func packArgs(k *Kernel, args []any) ([]byte, []uint32, error) {
	p, err := kernelargs.Pack(args)
	if err != nil {
		return nil, nil, invalid("launch %s: %v", k.name, err)
	}
	for i, n := range p.Sizes {
		if n != k.sizes[i] {
			return nil, nil, invalid("launch %s: argument %d (%T) is %d bytes, the parameter %d", k.name, i, args[i], n, k.sizes[i])
		}
	}
	return p.Buf, p.Offsets, nil
}

// Stream runs launches one after the other, in the order they were made,
// concurrently with the caller and with other streams (one stream per
// emulated device or rank). Safe for concurrent use.
type Stream struct {
	device uint32
	queue  chan *launchReq
	cancel cancelFlag
	stop   chan struct{}
	exited chan struct{}

	mu     sync.Mutex
	last   *launchReq // the latest launch queued
	err    error      // the first launch error since the last Sync
	closed bool
}

// NewStream starts a stream on emulated device 0. Close it when done.
func NewStream() *Stream { return NewDeviceStream(0) }

// NewDeviceStream starts a stream whose launches run on emulated device
// dev: the scope checker counts threads of launches on different devices
// as outside each other's gpu scope. Close it when done.
func NewDeviceStream(dev uint32) *Stream {
	s := &Stream{queue: make(chan *launchReq, 256), cancel: newCancelFlag(), stop: make(chan struct{}), exited: make(chan struct{}),
		device: dev}
	go s.run()
	return s
}

func (s *Stream) run() {
	defer close(s.exited)
	for {
		select {
		case <-s.stop:
			return
		case l := <-s.queue:
			l.err = l.k.m.sm.run(l, s.cancel.p)
			if l.err != nil {
				s.mu.Lock()
				if s.err == nil {
					s.err = l.err
				}
				s.mu.Unlock()
			}
			close(l.done)
		}
	}
}

// Launch queues k on the stream with grid x block threads, sharedBytes of
// dynamic shared memory (FD_DYN_SHARED) and args (see cuda.Function.Launch
// for their types; structs are passed by value). A launch the kernel
// cannot take is refused here; failures while it runs come from Sync.
func (s *Stream) Launch(k *Kernel, grid, block Dim3, sharedBytes int, args ...any) error {
	l, err := newLaunch(k, grid, block, sharedBytes, args)
	if err != nil {
		return err
	}
	k.m.mu.Lock()
	closed := k.m.closed
	k.m.mu.Unlock()
	if closed {
		return ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	l.device = s.device
	s.last = l
	s.queue <- l
	return nil
}

// Sync waits until every launch queued so far has finished and returns
// the first failure since the previous Sync. When ctx ends first, the
// running and queued launches are aborted (at their next yield point) and
// Sync returns ctx's error.
func (s *Stream) Sync(ctx context.Context) error {
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	if last != nil {
		select {
		case <-last.done:
		case <-ctx.Done():
			s.cancel.set(1)
			<-last.done // every launch sees the flag at its next yield point
			s.cancel.set(0)
			s.mu.Lock()
			s.err = nil
			s.mu.Unlock()
			return ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.err
	s.err = nil
	return err
}

// Close aborts what is still queued or running, waits for it and stops
// the stream.
func (s *Stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	last := s.last
	s.mu.Unlock()
	if last != nil {
		s.cancel.set(1)
		<-last.done
	}
	close(s.stop)
	<-s.exited
	s.cancel.free()
	return nil
}
