package gpu

import (
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
)

// WatcherConfig tunes a Watcher. The zero value is the default: adaptive
// polling on an unpinned (but locked) OS thread.
type WatcherConfig struct {
	// Pin binds the watcher's OS thread to CPU before it starts polling.
	Pin bool
	CPU int
	// Poll is fabric.PollAdaptive (the default) or fabric.PollSpin, which
	// never sleeps: the lowest latency, at the price of one core.
	Poll fabric.PollMode
	// Spins is how many scans without a change the adaptive watcher makes
	// before it starts yielding (default 2000), Yields how many yields come
	// before it sleeps (default 50). The sleep doubles from 1 µs up to
	// MaxSleep (default 50 µs), which bounds how late a change is seen
	// after a quiet spell. Any change goes back to spinning.
	Spins, Yields int
	MaxSleep      time.Duration
	// Logger receives start and stop (debug) and callback panics (error).
	// Default slog.Default().
	Logger *slog.Logger
}

const (
	minSleep        = time.Microsecond
	defaultSpins    = 2000
	defaultYields   = 50
	defaultMaxSleep = 50 * time.Microsecond
)

func (c *WatcherConfig) withDefaults() error {
	if c.Spins < 0 || c.Yields < 0 || c.MaxSleep < 0 {
		return invalid("watcher config: negative spins %d, yields %d or sleep %v", c.Spins, c.Yields, c.MaxSleep)
	}
	if c.Pin && (c.CPU < 0 || c.CPU >= maxCPUs) {
		return invalid("watcher config: cpu %d", c.CPU)
	}
	if c.Spins == 0 {
		c.Spins = defaultSpins
	}
	if c.Yields == 0 {
		c.Yields = defaultYields
	}
	if c.MaxSleep == 0 {
		c.MaxSleep = defaultMaxSleep
	}
	c.MaxSleep = max(c.MaxSleep, minSleep)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// maxCPUs is how many CPUs a unix.CPUSet can name.
var maxCPUs = len(unix.CPUSet{}) * 64

// Slot states. A callback runs only in slotRunning, entered from slotIdle
// by the watcher; Release moves slotIdle to slotReleased itself, or asks a
// running callback's watcher to do it (slotReleaseAsked).
//
//	idle ──watcher──► running ──cb true──► idle
//	  │                  │ cb false, or Release during cb
//	  └──Release──► released ◄──watcher──┘
const (
	slotIdle uint32 = iota
	slotRunning
	slotReleaseAsked
	slotReleased
)

// slotState is one acquisition of a slot. A released slot index gets a
// fresh slotState when acquired again.
type slotState struct {
	idx   int
	word  *atomic.Uint64
	cb    func(old, new uint64) bool
	state atomic.Uint32
	last  uint64 // the last value seen; the watcher goroutine's alone
}

// Watcher is the scalar watcher: kernels bump 64-bit slots in host-mapped
// memory, and one goroutine, locked to its OS thread (optionally pinned),
// polls the acquired slots with atomic loads and calls each slot's
// callback with the old and new value whenever the value it reads
// differs from the last one it saw. A slot written faster than it is
// polled shows the values in order with some skipped: every change is
// reported as old -> new, each callback's old is the previous callback's
// new, and the last value written is always seen.
//
// Callbacks run on the watcher goroutine one at a time, so they must be
// short; a slow callback delays the other slots (it loses nothing: values
// stay in memory). A callback may Acquire and Release slots and Close the
// watcher. A panicking callback is logged and its slot released.
//
// Methods are safe for concurrent use.
type Watcher struct {
	mem SlotMemory
	cfg WatcherConfig
	log *slog.Logger

	mu      sync.Mutex
	free    []int // free indices; the lowest is popped first
	closed  bool  // Close called: no more Acquire
	memGone bool  // the memory is freed: Release must not touch it
	active  atomic.Pointer[[]*slotState]

	closing   atomic.Bool
	closeOnce sync.Once
	quit      chan struct{} // closed by Close
	wake      chan struct{} // a new slot to watch
	done      chan struct{} // closed when the goroutine has exited
	tid       int           // the watcher's thread id
	memErr    error         // from closing the memory; read after done

	scans   atomic.Uint64
	changes atomic.Uint64
}

// NewCUDAWatcher starts a watcher over DefaultSlots slots of pinned,
// host-mapped memory allocated in c (NewCUDASlots).
func NewCUDAWatcher(c *cuda.Context, cfg WatcherConfig) (*Watcher, error) {
	mem, err := NewCUDASlots(c, DefaultSlots)
	if err != nil {
		return nil, err
	}
	return NewWatcher(mem, cfg)
}

// NewWatcher starts a watcher over mem, which it owns from now on: Close
// frees it, and so does NewWatcher when it fails.
func NewWatcher(mem SlotMemory, cfg WatcherConfig) (*Watcher, error) {
	if mem == nil {
		return nil, invalid("new watcher: nil slot memory")
	}
	n := mem.Slots()
	if err := cfg.withDefaults(); err != nil || n <= 0 {
		_ = mem.Close()
		if err == nil {
			err = invalid("new watcher: %d slots", n)
		}
		return nil, err
	}
	w := &Watcher{mem: mem, cfg: cfg, log: cfg.Logger, free: make([]int, 0, n),
		quit: make(chan struct{}), wake: make(chan struct{}, 1), done: make(chan struct{})}
	for i := n - 1; i >= 0; i-- {
		mem.Word(i).Store(0)
		w.free = append(w.free, i)
	}
	w.active.Store(new([]*slotState))
	ready := make(chan error, 1)
	go w.run(ready)
	if err := <-ready; err != nil {
		<-w.done
		return nil, err
	}
	return w, nil
}

// run is the watcher goroutine.
func (w *Watcher) run(ready chan<- error) {
	// Locked for good: a thread whose affinity was changed must not serve
	// other goroutines, so it ends with this goroutine.
	runtime.LockOSThread()
	defer func() {
		w.mu.Lock()
		w.memGone = true
		w.mu.Unlock()
		w.memErr = w.mem.Close()
		close(w.done)
	}()
	w.tid = unix.Gettid()
	if w.cfg.Pin {
		var set unix.CPUSet
		set.Set(w.cfg.CPU)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			ready <- fmt.Errorf("gpu: pin watcher to cpu %d: %w", w.cfg.CPU, err)
			return
		}
	}
	w.log.Debug("gpu watcher started", "slots", w.mem.Slots(), "poll", w.cfg.Poll.String(),
		"pinned", w.cfg.Pin, "cpu", w.cfg.CPU)
	defer w.log.Debug("gpu watcher stopped", "scans", w.scans.Load(), "changes", w.changes.Load())
	ready <- nil
	w.poll()
}

// poll scans the acquired slots until Close.
func (w *Watcher) poll() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	idle, sleep := 0, minSleep
	for !w.closing.Load() {
		act := *w.active.Load()
		if len(act) == 0 {
			select {
			case <-w.wake:
			case <-w.quit:
			}
			idle, sleep = 0, minSleep
			continue
		}
		w.scans.Add(1)
		seen := false
		for _, s := range act {
			v := s.word.Load()
			if v == s.last {
				continue
			}
			old := s.last
			s.last = v
			seen = true
			w.fire(s, old, v)
			if w.closing.Load() {
				return
			}
		}
		if seen || w.cfg.Poll == fabric.PollSpin {
			idle, sleep = 0, minSleep
			continue
		}
		idle++
		switch {
		case idle <= w.cfg.Spins:
		case idle <= w.cfg.Spins+w.cfg.Yields:
			runtime.Gosched()
		default:
			timer.Reset(sleep)
			select {
			case <-timer.C:
				sleep = min(2*sleep, w.cfg.MaxSleep)
			case <-w.wake:
				timer.Stop()
				idle, sleep = 0, minSleep
			case <-w.quit:
			}
		}
	}
}

// fire runs s's callback for one change, unless s was released.
func (w *Watcher) fire(s *slotState, old, v uint64) {
	if !s.state.CompareAndSwap(slotIdle, slotRunning) {
		return
	}
	w.changes.Add(1)
	keep := w.call(s, old, v)
	if keep && s.state.CompareAndSwap(slotRunning, slotIdle) {
		return
	}
	s.state.Store(slotReleased)
	w.retire(s)
}

func (w *Watcher) call(s *slotState, old, v uint64) (keep bool) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("gpu watcher: callback panicked; its slot is released", "slot", s.idx, "panic", p)
			keep = false
		}
	}()
	return s.cb(old, v)
}

// retire stops watching s, zeroes its slot and frees its index.
func (w *Watcher) retire(s *slotState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.memGone {
		// Zeroed before the slot leaves the active list, so whoever sees
		// it gone (Stats) sees it zero.
		s.word.Store(0)
		w.free = append(w.free, s.idx)
		// Keep the lowest index on top, so slots are reused from the front.
		slices.SortFunc(w.free, func(a, b int) int { return b - a })
	}
	act := slices.DeleteFunc(slices.Clone(*w.active.Load()), func(x *slotState) bool { return x == s })
	w.active.Store(&act)
}

// Acquire takes a free slot, zeroes it and starts watching it: cb(old,
// new) runs on the watcher goroutine after each change seen (the first
// with old 0). Returning false releases the slot. Errors: ErrNoFreeSlot
// when all are taken, fabric.ErrClosed after Close, and
// fabric.ErrInvalidArgument for a nil cb.
func (w *Watcher) Acquire(cb func(old, new uint64) bool) (*Slot, error) {
	if cb == nil {
		return nil, invalid("acquire watcher slot: nil callback")
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, fmt.Errorf("gpu: acquire watcher slot: %w", fabric.ErrClosed)
	}
	if len(w.free) == 0 {
		w.mu.Unlock()
		return nil, fmt.Errorf("gpu: acquire watcher slot: all %d in use: %w", w.mem.Slots(), ErrNoFreeSlot)
	}
	idx := w.free[len(w.free)-1]
	w.free = w.free[:len(w.free)-1]
	s := &slotState{idx: idx, word: w.mem.Word(idx), cb: cb}
	s.word.Store(0)
	act := append(slices.Clone(*w.active.Load()), s)
	w.active.Store(&act)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return &Slot{w: w, s: s}, nil
}

// Close stops the watcher goroutine, waits for it (a callback in progress
// finishes first) and frees the slot memory; no callback runs after it
// returns. Kernels must no longer write the slots. Called from a callback
// it cannot wait for itself: the watcher stops and frees the memory as
// soon as that callback returns. Calling Close again returns the first
// result.
func (w *Watcher) Close() error {
	w.closeOnce.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		w.closing.Store(true)
		close(w.quit)
	})
	select {
	case <-w.done:
		return w.memErr
	default:
	}
	// The watcher goroutine keeps its thread locked while it lives, so
	// only it can be running on that thread: this is a call from a callback.
	if unix.Gettid() == w.tid {
		return nil
	}
	<-w.done
	return w.memErr
}

// Done is closed once the watcher goroutine has exited and the memory is
// freed.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// WatcherStats are a watcher's counters.
type WatcherStats struct {
	Slots   int    // slots in the memory
	Active  int    // slots acquired
	Scans   uint64 // passes over the acquired slots
	Changes uint64 // callbacks run
}

// Stats returns the watcher's counters.
func (w *Watcher) Stats() WatcherStats {
	return WatcherStats{Slots: w.mem.Slots(), Active: len(*w.active.Load()),
		Scans: w.scans.Load(), Changes: w.changes.Load()}
}

// Slot is one acquired watcher slot. Safe for concurrent use.
type Slot struct {
	w *Watcher
	s *slotState
}

// Index returns the slot's index in the watcher's memory.
func (sl *Slot) Index() int { return sl.s.idx }

// DevicePtr returns the slot's address for kernels (an unsigned long long
// *; KernelSlotAdd and KernelSlotStore take it). For host slot memory it
// is the host address.
func (sl *Slot) DevicePtr() cuda.DevicePtr { return cuda.DevicePtr(sl.w.mem.DeviceAddr(sl.s.idx)) }

// Word returns the CPU's atomic view of the slot, for writers on the host.
// It is valid until the slot is released.
func (sl *Slot) Word() *atomic.Uint64 { return sl.s.word }

// Release stops watching the slot and zeroes it. No callback for it starts
// after Release returns; Release does not wait for one already running
// (so a callback may release its own slot): then the slot is zeroed and
// freed when that callback returns. Releasing twice, or a slot
// whose callback returned false, gives ErrReleased.
func (sl *Slot) Release() error {
	if sl == nil || sl.s == nil {
		return invalid("release watcher slot: nil slot")
	}
	s := sl.s
	for {
		switch s.state.Load() {
		case slotIdle:
			if s.state.CompareAndSwap(slotIdle, slotReleased) {
				sl.w.retire(s)
				return nil
			}
		case slotRunning:
			if s.state.CompareAndSwap(slotRunning, slotReleaseAsked) {
				return nil
			}
		default:
			return fmt.Errorf("gpu: release watcher slot %d: %w", s.idx, ErrReleased)
		}
	}
}
