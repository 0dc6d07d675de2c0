package cuda

import (
	"runtime"
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
