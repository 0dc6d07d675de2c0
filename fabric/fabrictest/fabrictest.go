package fabrictest

import (
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/memfabric"
)

// The in-process transports (package memfabric), registered by
// importing this package.
const (
	Mem  = "mem"  // bytes really move, within this process
	Null = "null" // every operation completes at once; nothing moves
)

// Faults are failures to inject into a mem domain: write completions that
// fail, posts refused for good, a provider that accepts only a few posts
// per call, a fatal poll error, a hook at the start of every poll.
type Faults = memfabric.Faults

// Inject sets the faults of the mem domain at address a (a NIC address
// from an engine's Info or a Descriptor). Call it while the engine is
// idle.
func Inject(a fabric.Address, f Faults) error { return memfabric.Inject(a, f) }

// LiveRegistrations returns how many mem-domain registrations exist in
// this process: zero once every engine closed (a leak check).
func LiveRegistrations() int64 { return memfabric.LiveRegistrations() }
