package fabric

import (
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/errdefs"
)

// Sentinel errors. Every error returned by this package and by its providers
// wraps exactly one of them, so errors.Is tells the category; typed errors
// (ProviderError, RequestError) carry the details.
var (
	// ErrClosed is returned by every call on a closed engine and fails every
	// operation still pending when the engine closes. It is net.ErrClosed.
	// It, ErrNotSupported, ErrTimeout, ErrInvalidArgument, ErrBusy and
	// ErrTooLarge are the categories every ferry package shares: cuda.ErrTimeout,
	// a2a.ErrTimeout and rendezvous.ErrTimeout are this same ErrTimeout.
	ErrClosed = errdefs.ErrClosed
	// ErrNotSupported means this machine, build or provider lacks a feature.
	ErrNotSupported = errdefs.ErrNotSupported
	// ErrTimeout means a wait's context ended or a protocol deadline passed.
	ErrTimeout = errdefs.ErrTimeout
	// ErrInvalidArgument is bad input found before anything was posted.
	ErrInvalidArgument = errdefs.ErrInvalidArgument
	// ErrUnknownRegion is a memory region that is nil, unregistered, or
	// registered with another engine.
	ErrUnknownRegion = rdma.ErrUnknownRegion
	// ErrOutOfBounds is a local or remote range outside its region.
	ErrOutOfBounds = errors.New("range outside memory region")
	// ErrNICMismatch is a descriptor or peer group listing more NICs than
	// any group has (MaxNICs). Counts that merely differ from the local
	// group's are fine: writes are striped over the target's NICs.
	ErrNICMismatch = errors.New("nic count mismatch")
	// ErrBadEncoding is a descriptor or address whose bytes cannot be decoded.
	ErrBadEncoding = rdma.ErrBadEncoding
	// ErrNoTransport means provider "auto" found neither EFA nor verbs.
	ErrNoTransport = errors.New("no rdma transport")
	// ErrUnknownProvider is a provider name no imported package registered.
	ErrUnknownProvider = rdma.ErrUnknownProvider
	// ErrBusy is a Transfer handle submitted again before it was waited for.
	ErrBusy = errdefs.ErrBusy
	// ErrTooLarge is a message larger than the send buffers.
	ErrTooLarge = errdefs.ErrTooLarge
	// ErrRemoved is returned to waiters of an immediate counter that was
	// removed or replaced.
	ErrRemoved = errors.New("counter removed")
	// ErrProvider is wrapped by every ProviderError.
	ErrProvider = rdma.ErrProvider
	// ErrPeerLost means a peer an operation or a wait depends on is gone:
	// its process ended, its endpoint closed, its connection broke or it
	// stopped accepting work. PeerError names it.
	ErrPeerLost = errdefs.ErrPeerLost
	// ErrQueueFull means a worker's request queue stayed full until the
	// request's deadline: the engine is applying back-pressure.
	ErrQueueFull = errors.New("queue full")
	// ErrNoMemory means the system refused memory: mmap, memfd_create or
	// a size limit (the errno is wrapped too).
	ErrNoMemory = errors.New("out of memory")
	// ErrAbandoned is returned by a Close that gave up on a worker stuck in
	// a provider call: that worker's domains stay open, and the memory
	// registered with them must not be freed.
	ErrAbandoned = rdma.ErrAbandoned
	// ErrStaleDescriptor means a descriptor or address names an engine
	// that is gone or was replaced (its incarnation is not the live one at
	// its endpoint). Errors wrapping it also wrap ErrPeerLost.
	ErrStaleDescriptor = rdma.ErrStaleDescriptor
	// ErrNotLeased means an immediate value of the lease range (LeaseBase
	// up) is not leased now: its lease was retired, or it was picked by
	// hand.
	ErrNotLeased = errors.New("immediate not leased")
	// ErrNotifyTooLarge refuses a notification payload over
	// MaxNotifyPayload bytes.
	ErrNotifyTooLarge = errors.New("notification payload too large")
	// ErrLeasesExhausted means no run of free lease slots, or no free
	// mailbox, is left for a new lease.
	ErrLeasesExhausted = errors.New("immediate leases exhausted")
	// ErrNotificationsLost is what Lease.WaitNotification reports in
	// place of notifications that were lost: overwritten in the mailbox
	// before the engine read them, or arriving while MaxQueuedNotices
	// waited to be taken (a *NotificationsLostError says how many).
	ErrNotificationsLost = errors.New("notifications lost")
)

// PeerError is an operation or a wait that failed because a peer was
// declared lost (see Engine.PeerStatus). It wraps ErrPeerLost and the
// evidence (a provider error, or what a liveness check found).
type PeerError struct {
	Peer  Address // the peer's endpoint address
	Cause error
}

func (e *PeerError) Error() string {
	return "peer " + e.Peer.String() + " lost: " + e.Cause.Error()
}

// Is makes errors.Is(err, ErrPeerLost) hold.
func (e *PeerError) Is(target error) bool { return target == ErrPeerLost }

// Unwrap returns the evidence.
func (e *PeerError) Unwrap() error { return e.Cause }

// ProviderError is an error reported by a provider library: a failed call or
// an error completion. It wraps ErrProvider, ErrTimeout when Timeout is set
// and ErrPeerLost when PeerLost is.
type ProviderError = rdma.ProviderError

// RequestError describes why a request was refused. It wraps one sentinel.
type RequestError struct {
	Op  string // "single write", "paged write", ...
	Msg string
	Err error // the sentinel
}

func (e *RequestError) Error() string { return e.Op + ": " + e.Msg + ": " + e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }

func reqErr(op string, sentinel error, format string, args ...any) error {
	return &RequestError{Op: op, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

// errNilEngine is what every method of a nil *Engine returns: the result
// of a failed Open used anyway. It matches ErrClosed.
var errNilEngine = fmt.Errorf("nil engine (did Open fail?): %w", ErrClosed)
