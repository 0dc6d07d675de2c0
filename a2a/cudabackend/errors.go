package cudabackend

import (
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/a2a"
)

// Status codes a kernel reports (FD_STATUS_* in ferry_device.h, A2A_STATUS_*
// in a2a_common.cuh).
const (
	statusOK       = 1
	statusTimeout  = 2
	statusBadIndex = 3
	statusBadShape = 4
)

// Awaited names what a kernel was waiting for when it timed out.
type Awaited uint32

const (
	// AwaitDispatchFree: the previous iteration's combine barrier, after
	// which this rank's buffers may be written again.
	AwaitDispatchFree Awaited = iota + 1
	// AwaitPlan: the CPU worker's receive plan, which needs every other
	// group's count row (the count exchange).
	AwaitPlan
	// AwaitNodeDispatch: a node rank's dispatch rows (pushed or staged).
	AwaitNodeDispatch
	// AwaitRDMADispatch: the dispatch writes from other domains.
	AwaitRDMADispatch
	// AwaitCombineFree: the dispatch barrier, after which combine may
	// overwrite what every rank read during dispatch.
	AwaitCombineFree
	// AwaitNodeCombine: a node rank's combine rows.
	AwaitNodeCombine
	// AwaitRDMACombine: the combine writes from other domains.
	AwaitRDMACombine
	// AwaitGrid: the other blocks of the launch at a grid barrier. They
	// never gathered: not all resident at once (a grid above what the
	// device holds beside the kernels already running), or one of them
	// stuck. Peer is the block that gave up.
	AwaitGrid
)

func (a Awaited) String() string {
	switch a {
	case AwaitDispatchFree:
		return "the previous iteration's combine barrier"
	case AwaitPlan:
		return "the receive plan (count exchange)"
	case AwaitNodeDispatch:
		return "a node rank's dispatch rows"
	case AwaitRDMADispatch:
		return "the RDMA dispatch writes"
	case AwaitCombineFree:
		return "the dispatch barrier"
	case AwaitNodeCombine:
		return "a node rank's combine rows"
	case AwaitRDMACombine:
		return "the RDMA combine writes"
	case AwaitGrid:
		return "the other blocks at a grid barrier"
	}
	return fmt.Sprintf("Awaited(%d)", uint32(a))
}

var phaseNames = [...]string{"dispatch send", "dispatch recv", "combine send", "combine recv"}

// KernelError is a kernel launch that did not complete its work. A
// timeout (the kernel gave up waiting, after the call's deadline or
// Options.Timeout) wraps a2a.ErrTimeout and names what was awaited; an
// expert id out of range or repeated in a token wraps
// a2a.ErrInvalidArgument; a launch the build cannot run, or a kernel that
// reported nothing, wraps ErrKernel.
type KernelError struct {
	Phase   string // "dispatch send", ...
	Rank    int
	Status  uint32
	Awaited Awaited // for timeouts
	Peer    int     // node-local rank, for node waits
	// Worker is the CPU worker's failure, when it had one: usually why a
	// flag the kernel waited for was never raised.
	Worker error
}

// ErrKernel is a kernel that failed for a reason other than a timeout or
// bad input: a launch mismatched with its build, or no status reported.
var ErrKernel = errors.New("a2a cuda kernel failed")

func (e *KernelError) Error() string {
	var s string
	switch e.Status {
	case statusTimeout:
		verb := "timed out waiting for"
		if e.Worker != nil {
			verb = "gave up waiting for"
		}
		s = fmt.Sprintf("a2a cuda rank %d %s: %s %v", e.Rank, e.Phase, verb, e.Awaited)
		if e.Awaited == AwaitNodeDispatch || e.Awaited == AwaitNodeCombine {
			s += fmt.Sprintf(" (node rank %d)", e.Peer)
		}
		if e.Awaited == AwaitGrid {
			s += fmt.Sprintf(" (block %d gave up)", e.Peer)
		}
	case statusBadIndex:
		s = fmt.Sprintf("a2a cuda rank %d %s: an expert id is out of range or repeated in a token", e.Rank, e.Phase)
	case statusBadShape:
		s = fmt.Sprintf("a2a cuda rank %d %s: launch does not match the kernel build", e.Rank, e.Phase)
	default:
		s = fmt.Sprintf("a2a cuda rank %d %s: kernel reported status %d", e.Rank, e.Phase, e.Status)
	}
	if e.Worker != nil {
		s += "; worker: " + e.Worker.Error()
	}
	return s
}

// Unwrap returns the category sentinel and the worker's error.
func (e *KernelError) Unwrap() []error {
	var cat error
	switch e.Status {
	case statusTimeout:
		cat = a2a.ErrTimeout
	case statusBadIndex:
		cat = a2a.ErrInvalidArgument
	default:
		cat = ErrKernel
	}
	if e.Worker != nil {
		return []error{cat, e.Worker}
	}
	return []error{cat}
}
