package gpu_test

import (
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/gpu"
	"github.com/ferryrdma/ferry/internal/testutil/cudatest"
)

// quiet is a logger for tests that provoke error logs on purpose.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// countingSlots counts Close calls on the memory a watcher owns.
type countingSlots struct {
	gpu.SlotMemory
	closes atomic.Int32
}

func (c *countingSlots) Close() error {
	c.closes.Add(1)
	return c.SlotMemory.Close()
}

func hostSlots(t testing.TB, n int) *countingSlots {
	t.Helper()
	m, err := gpu.NewHostSlots(n)
	if err != nil {
		t.Fatal(err)
	}
	return &countingSlots{SlotMemory: m}
}

// newWatcher starts a watcher over n host slots; at cleanup it closes it
// and checks that the memory was freed once and the goroutine is gone.
func newWatcher(t testing.TB, n int, cfg gpu.WatcherConfig) (*gpu.Watcher, *countingSlots) {
	t.Helper()
	mem := hostSlots(t, n)
	w, err := gpu.NewWatcher(mem, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("close watcher: %v", err)
		}
		if c := mem.closes.Load(); c != 1 {
			t.Errorf("slot memory closed %d times, want 1", c)
		}
		checkNoWatchers(t)
	})
	return w, mem
}

// checkNoWatchers fails if a watcher goroutine is still alive (bounded
// wait: a goroutine that closed done may still be unwinding).
func checkNoWatchers(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		s := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(s, "gpu.(*Watcher).run") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("watcher goroutine leaked:\n%s", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// change is one callback call.
type change struct{ old, new uint64 }

// waitFor receives from ch until pred holds, or fails after d.
func waitFor(t testing.TB, ch <-chan change, d time.Duration, pred func(change) bool) change {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case c := <-ch:
			if pred(c) {
				return c
			}
		case <-timer.C:
			t.Fatalf("no matching callback within %v", d)
			return change{}
		}
	}
}

func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// requireCUDA returns device 0's primary context or skips with the reason;
// at cleanup the context must close cleanly (ErrBusy means a leak).
var requireCUDA = cudatest.Context
