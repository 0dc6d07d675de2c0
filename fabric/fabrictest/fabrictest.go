package fabrictest

import (
	"testing"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/enginetest"
	"github.com/ferryrdma/ferry/internal/memfabric"
)

// The in-process transports this package registers.
const (
	Mem  = "mem"  // bytes really move, within this process
	Null = "null" // every operation completes at once; nothing moves
)

// Params selects the transport the conformance suite runs on: its name,
// the node address to bind (libfabric's tcp wants "127.0.0.1" in tests),
// NICs per engine (1-4) and the poll mode.
type Params = enginetest.Params

// Env is two engines, a writer A and a target B, with a registered source
// on A and a remote-writable destination on B, closed at the test's end
// with a registration leak check.
type Env = enginetest.Env

// Run runs the whole conformance suite for p as subtests of t. Transports
// that cannot open here (no device) skip with the reason.
func Run(t *testing.T, p Params) { enginetest.Run(t, p) }

// NewEnv opens the two engines of p and registers their buffers; the test's
// cleanup closes everything.
func NewEnv(tb testing.TB, p Params) *Env { return enginetest.NewEnv(tb, p) }

// OpenEngine opens one engine for p, closed at the test's end.
func OpenEngine(tb testing.TB, p Params) *fabric.Engine { return enginetest.OpenEngine(tb, p) }

// Faults are failures to inject into a mem domain: write completions that
// fail, posts refused for good, a provider that accepts only a few posts
// per call, a fatal poll error.
type Faults = memfabric.Faults

// Inject sets the faults of the mem domain at address a (a NIC address
// from an engine's Info or a Descriptor). Call it while the engine is
// idle.
func Inject(a fabric.Address, f Faults) error { return memfabric.Inject(a, f) }

// LiveRegistrations returns how many mem-domain registrations exist in
// this process: zero once every engine closed (a leak check).
func LiveRegistrations() int64 { return memfabric.LiveRegistrations() }
