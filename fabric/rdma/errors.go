package rdma

import (
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/internal/errdefs"
)

// The error categories providers report. The engine returns the same
// values (fabric.ErrProvider is ErrProvider, ...), so errors.Is holds
// whichever package a caller names. The shared categories (ErrClosed,
// ErrNotSupported, ErrTimeout, ErrInvalidArgument, ErrPeerLost) are those
// every ferry package uses.
var (
	// ErrClosed: the domain or engine is closed. It is net.ErrClosed.
	ErrClosed = errdefs.ErrClosed
	// ErrNotSupported: this machine, build or provider lacks a feature.
	ErrNotSupported = errdefs.ErrNotSupported
	// ErrTimeout: a protocol deadline passed.
	ErrTimeout = errdefs.ErrTimeout
	// ErrInvalidArgument: bad input found before anything was posted.
	ErrInvalidArgument = errdefs.ErrInvalidArgument
	// ErrPeerLost: a peer is gone (its process ended, its endpoint closed,
	// its connection broke or it stopped accepting work).
	ErrPeerLost = errdefs.ErrPeerLost
	// ErrUnknownRegion is a memory region that is unregistered, or a remote
	// key the target does not know.
	ErrUnknownRegion = errors.New("unknown memory region")
	// ErrBadEncoding is an address (or anything built of them) whose bytes
	// cannot be decoded.
	ErrBadEncoding = errors.New("bad encoding")
	// ErrUnknownProvider is a transport or provider name no imported
	// package registered.
	ErrUnknownProvider = errors.New("unknown provider")
	// ErrProvider is wrapped by every ProviderError.
	ErrProvider = errors.New("provider error")
	// ErrNotReadable is a read of a region its owner did not register
	// with AccessRemoteRead (or of a range outside it, where the provider
	// cannot tell the two apart).
	ErrNotReadable = errors.New("remote region not readable")
	// ErrAbandoned says a domain was left open because closing it was not
	// safe (see Abandoner): the memory registered with it must not be freed.
	ErrAbandoned = errors.New("worker abandoned")
	// ErrStaleDescriptor: an address or descriptor names an engine
	// incarnation that no longer exists: the engine closed, its process
	// ended, or a new engine took its address. Nothing sent through it can
	// land; export a fresh descriptor from the engine now there. Errors
	// that wrap it also wrap ErrPeerLost.
	ErrStaleDescriptor = errors.New("stale descriptor")
)

// StaleError reports an address whose engine incarnation is gone. It wraps
// ErrStaleDescriptor and ErrPeerLost: the peer named is lost for good.
func StaleError(addr Address, why string) error {
	return &staleError{addr: addr, why: why}
}

type staleError struct {
	addr Address
	why  string
}

func (e *staleError) Error() string {
	return fmt.Sprintf("endpoint %s (incarnation %016x): %s: %v", e.addr.Summary(), e.addr.inc, e.why, ErrStaleDescriptor)
}

func (e *staleError) Is(target error) bool {
	return target == ErrStaleDescriptor || target == ErrPeerLost
}

// ProviderError is an error reported by a provider library: a failed call or
// an error completion. It wraps ErrProvider, ErrTimeout when Timeout is set
// and ErrPeerLost when PeerLost is.
type ProviderError struct {
	Provider  string // "libfabric/tcp;ofi_rxm", "verbs", ...
	Op        string // "fi_writemsg", "write completion", ...
	Errno     int    // the library's error number (positive)
	ProvErrno int    // provider-specific error number, 0 if none
	Msg       string // the library's text for the error
	Timeout   bool   // the error is a protocol deadline
	// PeerLost says the error is the peer's: its connection was reset or
	// refused, or it stopped answering.
	PeerLost bool
	// PeerClosed (with PeerLost) says the peer ended in order: it closed
	// its endpoint (its engine) and said so first. Its operations fail as
	// a lost peer's do, but the engine reports it at debug level: that is
	// how every run ends, not a fault.
	PeerClosed bool
	// RegionGone says the target has no region with the write's key (it
	// was unregistered, or never was): the error then also matches
	// ErrUnknownRegion, and the engine fails later writes to that region
	// at once.
	RegionGone bool
	// NotReadable says the target refused a read: the region lacks
	// AccessRemoteRead. The error then also matches ErrNotReadable.
	NotReadable bool
}

func (e *ProviderError) Error() string {
	s := fmt.Sprintf("%s: %s: %s (errno %d", e.Provider, e.Op, e.Msg, e.Errno)
	if e.ProvErrno != 0 {
		s += fmt.Sprintf(", provider errno %d", e.ProvErrno)
	}
	return s + ")"
}

// Is makes errors.Is(err, ErrProvider) and, when they apply, ErrTimeout and
// ErrPeerLost hold.
func (e *ProviderError) Is(target error) bool {
	return target == ErrProvider || (e.Timeout && target == ErrTimeout) || (e.PeerLost && target == ErrPeerLost) ||
		(e.RegionGone && target == ErrUnknownRegion) || (e.NotReadable && target == ErrNotReadable)
}
