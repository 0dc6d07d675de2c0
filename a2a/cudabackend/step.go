package cudabackend

import (
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/a2a"
)

// Phase is one of the four launches of an iteration, in call order.
type Phase int

const (
	PhaseDispatchSend Phase = iota
	PhaseDispatchRecv
	PhaseCombineSend
	PhaseCombineRecv
)

func (p Phase) String() string {
	if p >= 0 && int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// DeviceIO is one rank's caller memory for an iteration, by device
// address: what a caller with tensors in device memory passes, and what a
// CUDA graph captures. Strides are bytes between token rows and elements
// for the float32 scale arrays, as in package a2a; 0 means packed. The
// memory must stay valid while a launch using it may run.
type DeviceIO struct {
	// Tokens is m (at most MaxTokens); with BoundM, the bound on it.
	Tokens uint32
	// BoundM is the device address of an int32 holding m, read when the
	// dispatch runs (so one captured graph serves any count), or 0.
	BoundM uint64

	X, XStride                                 uint64 // m token rows
	Scales, ScaleTokenStride, ScaleElemStride  uint64 // m x Scales float32 (0 when none)
	Indices                                    uint64 // m x K uint32 expert ids
	OutX, OutXStride                           uint64 // OutputRows rows
	OutScales, OutScaleTokenStride, OutScaleEl uint64
	ExpertTokens, ExpertOffsets                uint64 // L int32; L+1 int32 or 0
	Y, YStride                                 uint64 // expert outputs, OutputRows rows
	Out, OutStride                             uint64 // m combined rows
	Weights                                    uint64 // m x K float32
	Accumulate                                 bool
	// Timeout bounds every wait of every launch (default Options.Timeout).
	Timeout time.Duration
}

// Launch is one kernel launch with its arguments fixed. It runs on the
// stream of any backend of its world (they load the same kernels); the
// zero Launch (no Kernel) launches nothing.
type Launch struct {
	Phase       Phase
	Kernel      Kernel
	Grid, Block int
	Args        []any
}

// Steps returns this rank's four launches of one iteration over io, in
// call order. Queued on one stream they run a whole iteration with no
// host call between them (the worker needs none): replayed as they are,
// or captured into a CUDA graph and replayed, each replay is the next
// iteration. With several ranks on one device, queue every rank's
// dispatch send, then every rank's dispatch receive, and so on (lock
// step), or give every rank its own stream and a grid small enough for
// all of them to be resident at once.
//
// Use either Steps or the a2a.Backend calls (through an a2a.Context) on a
// backend, not both: their epochs are counted apart.
func (b *Backend) Steps(io DeviceIO) ([4]Launch, error) {
	l := &b.l
	if int(io.Tokens) > l.MaxTokens {
		return [4]Launch{}, fmt.Errorf("a2a cuda steps: %d tokens, at most %d: %w", io.Tokens, l.MaxTokens, a2a.ErrInvalidArgument)
	}
	tmo := io.Timeout
	if tmo <= 0 {
		tmo = b.timeout
	}
	ns := uint64(tmo.Nanoseconds())
	def := func(v uint64, d int) uint64 {
		if v == 0 {
			return uint64(d)
		}
		return v
	}
	acc := uint32(0)
	if io.Accumulate {
		acc = 1
	}
	p := b.params.Addr()
	args := [4][]any{
		{p, io.X, def(io.XStride, l.TokenBytes), io.Scales, def(io.ScaleTokenStride, l.Scales), def(io.ScaleElemStride, 1),
			io.Indices, io.Tokens, io.BoundM, ns},
		{p, io.OutX, def(io.OutXStride, l.TokenBytes), io.OutScales, def(io.OutScaleTokenStride, l.Scales),
			def(io.OutScaleEl, 1), io.ExpertTokens, io.ExpertOffsets, ns},
		{p, io.Y, def(io.YStride, l.CombineBytes), ns},
		{p, io.Out, def(io.OutStride, l.CombineBytes), io.Weights, acc, ns},
	}
	var out [4]Launch
	for i := range out {
		out[i] = Launch{Phase: Phase(i), Kernel: b.k[i], Grid: b.grid, Block: b.block, Args: args[i]}
	}
	return out, nil
}

// Stream is the backend's stream, where the a2a.Backend calls launch.
func (b *Backend) Stream() Stream { return b.st }

// Run queues l on st.
func (l Launch) Run(st Stream) error { return st.Launch(l.Kernel, l.Grid, l.Block, l.Args...) }

// Status returns the outcome of the last finished launch of phase: nil, or
// a *KernelError (a timeout names what was awaited). epoch is the
// iteration the launch ran (counted from 1).
func (b *Backend) Status(phase Phase) (epoch uint32, err error) {
	s := slotStatus + int(phase)
	code := b.ctrlWord(s, 0).Load()
	epoch = b.ctrlWord(s, 3).Load()
	if code == statusOK {
		return epoch, nil
	}
	return epoch, &KernelError{Phase: phase.String(), Rank: b.l.Rank, Status: code,
		Awaited: Awaited(b.ctrlWord(s, 1).Load()), Peer: int(b.ctrlWord(s, 2).Load()), Worker: b.workerErr()}
}
