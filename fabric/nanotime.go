package fabric

import (
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's monotonic clock: a few nanoseconds, no
// allocation, unlike time.Now on the worker's hot path.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
