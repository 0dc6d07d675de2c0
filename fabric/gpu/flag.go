package gpu

import (
	"sync"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
)

// flagStore is what Flag writes: a cuda.Flag, or a host stand-in in tests.
type flagStore interface {
	Set(v uint32)
	Load() uint32
}

// Flag makes a cuda.Flag a fabric.Flag. Instead of a bare "1" each Set
// publishes the next epoch (1, 2, 3, ... wrapping), so a kernel never has
// to clear the flag: it waits until the flag reaches the epoch it expects
// (ferry_gpu_wait_epoch in KernelSource keeps that expectation in device
// memory), which is what makes the wait replayable inside a CUDA graph and
// free of the set/clear race a 0/1 flag has. Safe for concurrent use; Set
// never blocks on the GPU.
type Flag struct {
	mu    sync.Mutex // keeps concurrent Sets publishing in order
	st    flagStore
	dev   cuda.DevicePtr
	epoch uint32
}

var _ fabric.Flag = (*Flag)(nil)

// NewFlag wraps f, whose value must still be 0 (a fresh flag).
func NewFlag(f cuda.Flag) (*Flag, error) {
	if f.IsZero() {
		return nil, invalid("new flag: zero cuda.Flag")
	}
	if v := f.Load(); v != 0 {
		return nil, invalid("new flag: flag holds %d, want a fresh (zero) flag", v)
	}
	return &Flag{st: f, dev: f.DevicePtr()}, nil
}

// Set publishes the next epoch. The fabric workers call it when a
// FlagCounter's credits are paid; the store has release ordering, so the
// data those immediates announced is visible to a kernel that sees it.
func (f *Flag) Set() {
	f.mu.Lock()
	f.epoch++
	f.st.Set(f.epoch)
	f.mu.Unlock()
}

// Epoch returns the last epoch published (0 before the first Set).
func (f *Flag) Epoch() uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.epoch
}

// DevicePtr is the address kernels wait on (const unsigned int *).
func (f *Flag) DevicePtr() cuda.DevicePtr { return f.dev }

// FlagCounter is a fabric.FlagCounter raising a GPU Flag: Arm(n) asks for
// n more immediates and returns the epoch the flag will reach once they
// have arrived. Rounds are kept apart even when the next round is armed
// before the previous one is paid (fabric's FlagCounter would merge them
// into one Set): a round is handed to the engine only after the one before
// it raised the flag, and surplus arrivals carry over. So the k-th Arm is
// always announced by epoch k, which a kernel captured once in a graph can
// wait for on every replay. Safe for concurrent use.
type FlagCounter struct {
	fc   *fabric.FlagCounter
	flag *Flag

	mu      sync.Mutex
	armed   bool    // a round is with the engine
	pending []int64 // rounds armed after it, in order
	issued  uint32  // epochs handed out by Arm
}

// NewFlagCounter makes imm a flag counter of e (replacing any counter for
// it) that raises f. Immediates held for imm (they arrived with no counter
// and no OnImm callback) count toward its first round.
func NewFlagCounter(e *fabric.Engine, imm uint32, f cuda.Flag) (*FlagCounter, error) {
	fl, err := NewFlag(f)
	if err != nil {
		return nil, err
	}
	return newFlagCounter(e, imm, fl)
}

func newFlagCounter(e *fabric.Engine, imm uint32, fl *Flag) (*FlagCounter, error) {
	if e == nil {
		return nil, invalid("flag counter %#x: nil engine", imm)
	}
	c := &FlagCounter{flag: fl}
	fc, err := e.FlagCounter(imm, roundFlag{c})
	if err != nil {
		return nil, err
	}
	c.fc = fc
	return c, nil
}

// roundFlag is the fabric.Flag the engine sees: it publishes the epoch,
// then hands the engine the next pending round.
type roundFlag struct{ c *FlagCounter }

func (r roundFlag) Set() {
	c := r.c
	c.flag.Set()
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.armed = false
		c.mu.Unlock()
		return
	}
	n := c.pending[0]
	c.pending = c.pending[1:]
	c.mu.Unlock()
	// Outside the lock: if the round is already paid, this calls Set again
	// at once (recursion bounded by the rounds pending).
	_ = c.fc.Wait(n)
}

// Arm asks for n (>= 1) more immediates and returns the epoch the flag
// will show once they and every earlier round have arrived. It never
// blocks. Once the counter is removed or replaced in the engine its rounds
// never complete, and Arm fails with fabric.ErrRemoved when it hands one
// to the engine.
func (c *FlagCounter) Arm(n int64) (uint32, error) {
	if n < 1 {
		return 0, invalid("arm flag counter: %d immediates", n)
	}
	c.mu.Lock()
	c.issued++
	epoch := c.issued
	if c.armed {
		c.pending = append(c.pending, n)
		c.mu.Unlock()
		return epoch, nil
	}
	c.armed = true
	c.mu.Unlock()
	if err := c.fc.Wait(n); err != nil {
		return 0, err // removed: the counter is dead, its epochs with it
	}
	return epoch, nil
}

// Count returns arrivals minus the credits of the round with the engine
// (rounds still pending are not counted).
func (c *FlagCounter) Count() int64 { return c.fc.Count() }

// Flag returns the flag the counter raises.
func (c *FlagCounter) Flag() *Flag { return c.flag }
