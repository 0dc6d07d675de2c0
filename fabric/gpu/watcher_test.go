package gpu_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/gpu"
)

func TestWatcherLockstepSeesEveryValue(t *testing.T) {
	for _, mode := range []fabric.PollMode{fabric.PollAdaptive, fabric.PollSpin} {
		t.Run(mode.String(), func(t *testing.T) {
			w, _ := newWatcher(t, 4, gpu.WatcherConfig{Poll: mode})
			ch := make(chan change, 16)
			s, err := w.Acquire(func(old, new uint64) bool { ch <- change{old, new}; return true })
			if err != nil {
				t.Fatal(err)
			}
			const n = 500
			for i := uint64(1); i <= n; i++ {
				s.Word().Store(i)
				c := waitFor(t, ch, 5*time.Second, func(change) bool { return true })
				if c != (change{i - 1, i}) {
					t.Fatalf("step %d: callback %d -> %d, want %d -> %d", i, c.old, c.new, i-1, i)
				}
			}
			if st := w.Stats(); st.Changes != n || st.Active != 1 || st.Slots != 4 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// A writer faster than the poller: values may be skipped, but the changes
// chain (each old is the previous new), only go forward, and end at the
// last value written.
func TestWatcherFreeRunningChain(t *testing.T) {
	w, _ := newWatcher(t, 2, gpu.WatcherConfig{})
	var mu sync.Mutex
	var seen []change
	var last atomic.Uint64
	s, err := w.Acquire(func(old, new uint64) bool {
		mu.Lock()
		seen = append(seen, change{old, new})
		mu.Unlock()
		last.Store(new)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200000
	for i := 0; i < n; i++ {
		s.Word().Add(1)
	}
	eventually(t, 5*time.Second, "last value seen", func() bool { return last.Load() == n })
	mu.Lock()
	defer mu.Unlock()
	prev := uint64(0)
	for i, c := range seen {
		if c.old != prev || c.new <= c.old {
			t.Fatalf("change %d: %d -> %d after %d", i, c.old, c.new, prev)
		}
		prev = c.new
	}
	t.Logf("%d writes seen as %d changes", n, len(seen))
}

func TestWatcherManySlots(t *testing.T) {
	const slots, writers, rounds = 512, 8, 100
	w, _ := newWatcher(t, slots, gpu.WatcherConfig{})
	type track struct {
		mu   sync.Mutex
		prev uint64
		bad  error
		last atomic.Uint64
	}
	tr := make([]*track, slots)
	ss := make([]*gpu.Slot, slots)
	for i := range ss {
		k := &track{}
		tr[i] = k
		s, err := w.Acquire(func(old, new uint64) bool {
			k.mu.Lock()
			if old != k.prev || new <= old {
				k.bad = fmt.Errorf("%d -> %d after %d", old, new, k.prev)
			}
			k.prev = new
			k.mu.Unlock()
			k.last.Store(new)
			return true
		})
		if err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
		if s.Index() != i {
			t.Fatalf("acquire %d got index %d (slots are handed out from the front)", i, s.Index())
		}
		ss[i] = s
	}
	if _, err := w.Acquire(func(uint64, uint64) bool { return true }); !errors.Is(err, gpu.ErrNoFreeSlot) {
		t.Fatalf("acquire past the last slot: %v, want ErrNoFreeSlot", err)
	}
	var wg sync.WaitGroup
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				for i := g; i < slots; i += writers {
					ss[i].Word().Add(1)
				}
			}
		}()
	}
	wg.Wait()
	for i, k := range tr {
		eventually(t, 5*time.Second, fmt.Sprintf("slot %d final value", i), func() bool { return k.last.Load() == rounds })
		k.mu.Lock()
		if k.bad != nil {
			t.Errorf("slot %d: %v", i, k.bad)
		}
		k.mu.Unlock()
	}
	for _, s := range ss {
		if err := s.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if st := w.Stats(); st.Active != 0 {
		t.Fatalf("active after releasing all: %d", st.Active)
	}
}

func TestWatcherCallbackFalseReleases(t *testing.T) {
	w, mem := newWatcher(t, 3, gpu.WatcherConfig{})
	ch := make(chan change, 16)
	s, err := w.Acquire(func(old, new uint64) bool { ch <- change{old, new}; return new < 5 })
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 5; i++ {
		s.Word().Store(i)
		waitFor(t, ch, 5*time.Second, func(c change) bool { return c.new == i })
	}
	eventually(t, 5*time.Second, "slot retired", func() bool { return w.Stats().Active == 0 })
	if v := mem.Word(s.Index()).Load(); v != 0 {
		t.Fatalf("released slot holds %d, want 0", v)
	}
	if err := s.Release(); !errors.Is(err, gpu.ErrReleased) {
		t.Fatalf("release after callback false: %v, want ErrReleased", err)
	}
	// The freed index is reused, from zero, with a fresh callback.
	ch2 := make(chan change, 4)
	s2, err := w.Acquire(func(old, new uint64) bool { ch2 <- change{old, new}; return true })
	if err != nil {
		t.Fatal(err)
	}
	if s2.Index() != s.Index() {
		t.Fatalf("reacquired index %d, want %d", s2.Index(), s.Index())
	}
	s2.Word().Store(7)
	if c := waitFor(t, ch2, 5*time.Second, func(change) bool { return true }); c != (change{0, 7}) {
		t.Fatalf("reused slot: %d -> %d, want 0 -> 7", c.old, c.new)
	}
	select {
	case c := <-ch:
		t.Fatalf("old callback ran after release: %+v", c)
	default:
	}
}

func TestWatcherRelease(t *testing.T) {
	w, mem := newWatcher(t, 2, gpu.WatcherConfig{})
	var calls atomic.Int32
	ch := make(chan change, 16)
	s, err := w.Acquire(func(old, new uint64) bool { calls.Add(1); ch <- change{old, new}; return true })
	if err != nil {
		t.Fatal(err)
	}
	s.Word().Store(1)
	waitFor(t, ch, 5*time.Second, func(c change) bool { return c.new == 1 })
	word := mem.Word(s.Index())
	if err := s.Release(); err != nil {
		t.Fatal(err)
	}
	// Zeroed at once, or as soon as the callback that reported 1 returns.
	eventually(t, 5*time.Second, "slot retired", func() bool { return w.Stats().Active == 0 })
	if v := word.Load(); v != 0 {
		t.Fatalf("released slot holds %d", v)
	}
	before := calls.Load()
	for i := uint64(2); i < 100; i++ {
		word.Store(i)
	}
	time.Sleep(20 * time.Millisecond)
	if c := calls.Load(); c != before {
		t.Fatalf("%d callbacks after Release", c-before)
	}
	if err := s.Release(); !errors.Is(err, gpu.ErrReleased) {
		t.Fatalf("second release: %v", err)
	}
	if err := (*gpu.Slot)(nil).Release(); !errors.Is(err, fabric.ErrInvalidArgument) {
		t.Fatalf("nil slot release: %v", err)
	}
}

// Release while the slot's callback runs returns at once; the watcher
// retires the slot when the callback returns, whatever it returned.
func TestWatcherReleaseDuringCallback(t *testing.T) {
	w, _ := newWatcher(t, 2, gpu.WatcherConfig{})
	entered, unblock := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	s, err := w.Acquire(func(old, new uint64) bool {
		if calls.Add(1) == 1 {
			close(entered)
			<-unblock
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Word().Store(1)
	<-entered
	done := make(chan error)
	go func() { done <- s.Release() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Release waited for the running callback")
	}
	s.Word().Store(2)
	close(unblock)
	eventually(t, 5*time.Second, "slot retired", func() bool { return w.Stats().Active == 0 })
	time.Sleep(10 * time.Millisecond)
	if c := calls.Load(); c != 1 {
		t.Fatalf("%d callbacks, want 1", c)
	}
}

func TestWatcherCloseWaitsForCallback(t *testing.T) {
	mem := hostSlots(t, 4)
	w, err := gpu.NewWatcher(mem, gpu.WatcherConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer checkNoWatchers(t)
	entered, unblock := make(chan struct{}), make(chan struct{})
	var after atomic.Bool
	var calls atomic.Int32
	s, err := w.Acquire(func(old, new uint64) bool {
		if calls.Add(1) == 1 {
			close(entered)
			<-unblock
		}
		if after.Load() {
			t.Error("callback after Close returned")
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Word().Store(1)
	<-entered
	closed := make(chan error)
	go func() { closed <- w.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a callback was running")
	case <-time.After(20 * time.Millisecond):
	}
	s.Word().Store(2)
	close(unblock)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	after.Store(true)
	if mem.closes.Load() != 1 {
		t.Fatalf("memory closed %d times", mem.closes.Load())
	}
	select {
	case <-w.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	if _, err := w.Acquire(func(uint64, uint64) bool { return true }); !errors.Is(err, fabric.ErrClosed) {
		t.Fatalf("acquire after close: %v", err)
	}
	// Releasing after Close does not touch the freed memory.
	if err := s.Release(); err != nil {
		t.Fatalf("release after close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if c := calls.Load(); c != 1 {
		t.Fatalf("%d callbacks, want 1", c)
	}
}

func TestWatcherCloseFromCallback(t *testing.T) {
	mem := hostSlots(t, 1)
	w, err := gpu.NewWatcher(mem, gpu.WatcherConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer checkNoWatchers(t)
	res := make(chan error, 1)
	s, err := w.Acquire(func(old, new uint64) bool { res <- w.Close(); return true })
	if err != nil {
		t.Fatal(err)
	}
	s.Word().Store(1)
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close from a callback blocked")
	}
	select {
	case <-w.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("watcher did not stop")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if mem.closes.Load() != 1 {
		t.Fatalf("memory closed %d times", mem.closes.Load())
	}
}

func TestWatcherCallbackMayAcquireAndRelease(t *testing.T) {
	w, _ := newWatcher(t, 4, gpu.WatcherConfig{})
	got := make(chan change, 4)
	var second *gpu.Slot
	first, err := w.Acquire(func(old, new uint64) bool {
		s, err := w.Acquire(func(o, n uint64) bool { got <- change{o, n}; return true })
		if err != nil {
			t.Error(err)
			return false
		}
		second = s
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	first.Word().Store(1)
	eventually(t, 5*time.Second, "second slot acquired", func() bool { return w.Stats().Active == 1 && w.Stats().Changes == 1 })
	second.Word().Store(9)
	if c := waitFor(t, got, 5*time.Second, func(change) bool { return true }); c != (change{0, 9}) {
		t.Fatalf("%+v", c)
	}
}

func TestWatcherPanickingCallback(t *testing.T) {
	w, _ := newWatcher(t, 2, gpu.WatcherConfig{Logger: quiet})
	bad, err := w.Acquire(func(old, new uint64) bool { panic("boom") })
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan change, 1)
	good, err := w.Acquire(func(old, new uint64) bool { ch <- change{old, new}; return true })
	if err != nil {
		t.Fatal(err)
	}
	bad.Word().Store(1)
	eventually(t, 5*time.Second, "panicking slot released", func() bool { return w.Stats().Active == 1 })
	good.Word().Store(3)
	waitFor(t, ch, 5*time.Second, func(c change) bool { return c.new == 3 })
	if err := bad.Release(); !errors.Is(err, gpu.ErrReleased) {
		t.Fatalf("release of the panicked slot: %v", err)
	}
}

func TestWatcherPin(t *testing.T) {
	w, _ := newWatcher(t, 1, gpu.WatcherConfig{Pin: true, CPU: 0})
	ch := make(chan change, 1)
	s, err := w.Acquire(func(old, new uint64) bool { ch <- change{old, new}; return true })
	if err != nil {
		t.Fatal(err)
	}
	s.Word().Store(1)
	waitFor(t, ch, 5*time.Second, func(change) bool { return true })
}

func TestWatcherBadConfig(t *testing.T) {
	if _, err := gpu.NewWatcher(nil, gpu.WatcherConfig{}); !errors.Is(err, fabric.ErrInvalidArgument) {
		t.Fatalf("nil memory: %v", err)
	}
	for _, cfg := range []gpu.WatcherConfig{
		{Spins: -1}, {Yields: -1}, {MaxSleep: -time.Second}, {Pin: true, CPU: -1}, {Pin: true, CPU: 1 << 20},
	} {
		mem := hostSlots(t, 1)
		if _, err := gpu.NewWatcher(mem, cfg); !errors.Is(err, fabric.ErrInvalidArgument) {
			t.Fatalf("%+v: %v, want ErrInvalidArgument", cfg, err)
		}
		if mem.closes.Load() != 1 {
			t.Fatalf("%+v: memory not freed by the failing NewWatcher", cfg)
		}
	}
	// A CPU the kernel refuses (offline or absent) fails at start, with the
	// memory freed and no goroutine left behind.
	mem := hostSlots(t, 1)
	if _, err := gpu.NewWatcher(mem, gpu.WatcherConfig{Pin: true, CPU: 1023}); err == nil {
		t.Skip("this machine has a cpu 1023")
	}
	if mem.closes.Load() != 1 {
		t.Fatal("memory not freed after a failed pin")
	}
	checkNoWatchers(t)
	if _, err := gpu.NewHostSlots(0); !errors.Is(err, fabric.ErrInvalidArgument) {
		t.Fatalf("zero host slots: %v", err)
	}
	w, _ := newWatcher(t, 1, gpu.WatcherConfig{})
	if _, err := w.Acquire(nil); !errors.Is(err, fabric.ErrInvalidArgument) {
		t.Fatalf("nil callback: %v", err)
	}
}

// An idle watcher (nothing acquired) blocks instead of polling.
func TestWatcherIdleDoesNotScan(t *testing.T) {
	w, _ := newWatcher(t, 1, gpu.WatcherConfig{Poll: fabric.PollSpin})
	time.Sleep(10 * time.Millisecond)
	if sc := w.Stats().Scans; sc != 0 {
		t.Fatalf("%d scans with no slot acquired", sc)
	}
}

// BenchmarkWatcherRoundTrip: a host goroutine stores a value and spins
// until the callback has seen it.
func BenchmarkWatcherRoundTrip(b *testing.B) {
	for _, mode := range []fabric.PollMode{fabric.PollSpin, fabric.PollAdaptive} {
		b.Run(mode.String(), func(b *testing.B) {
			w, _ := newWatcher(b, 1, gpu.WatcherConfig{Poll: mode})
			var seen atomic.Uint64
			s, err := w.Acquire(func(old, new uint64) bool { seen.Store(new); return true })
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			v := uint64(0)
			for b.Loop() {
				v++
				s.Word().Store(v)
				deadline := time.Now().Add(5 * time.Second)
				for spins := 0; seen.Load() != v; spins++ {
					if spins%(1<<16) == 0 && time.Now().After(deadline) {
						b.Fatalf("value %d not seen within 5 s", v)
					}
				}
			}
		})
	}
}
