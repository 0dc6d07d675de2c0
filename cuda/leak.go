package cuda

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// leaked counts objects that were garbage collected without Close.
var leaked atomic.Int64

// LeakedObjects returns how many objects of this package (memory, streams,
// events, modules, graphs) were garbage collected without being closed.
// Their driver resources stay allocated until the context is destroyed:
// the count is a safety net for tests (assert it stays 0 after a GC), not
// a collector.
func LeakedObjects() int64 { return leaked.Load() }

// leakCheck is embedded by owning types: track arms it at construction,
// and closing disarms it.
type leakCheck struct{ c runtime.Cleanup }

func countLeak(int) { leaked.Add(1) }

func track[T any](obj *T, lc *leakCheck) *T {
	lc.c = runtime.AddCleanup(obj, countLeak, 0)
	return obj
}

func (lc *leakCheck) closed() { lc.c.Stop() }

// resource is embedded by every object made in a Context: the lock its
// methods take, whether it is closed, and its leak check.
type resource struct {
	leak leakCheck

	mu     sync.Mutex
	closed bool
}

// release is how such an object closes: the first call disarms the leak
// check, runs destroy (which frees the driver object) under the lock and
// counts one child fewer in ctx; later calls return nil.
func (r *resource) release(ctx *Context, destroy func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.leak.closed()
	defer ctx.dropChild()
	return destroy()
}
