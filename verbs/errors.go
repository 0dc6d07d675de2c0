package verbs

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ibv"
)

// provName is the registry name and the Provider field of every error.
const provName = "verbs"

// provErrHandshake marks an Event failed by a connection deadline (its
// Errno is ETIMEDOUT), as opposed to a work completion's status.
const provErrHandshake = -1

// wrapErr turns a failed verbs call into an error that wraps both
// rdma.ErrProvider (or ErrNotSupported for EOPNOTSUPP/ENOSYS) and the
// errno.
func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var oe *ibv.OpError
	if !errors.As(err, &oe) {
		return fmt.Errorf("verbs: %s: %w", op, err)
	}
	if errors.Is(oe.Errno, syscall.EOPNOTSUPP) || errors.Is(oe.Errno, syscall.ENOSYS) || errors.Is(oe.Errno, syscall.EPROTONOSUPPORT) {
		return fmt.Errorf("verbs: %s: %w: %w", op, rdma.ErrNotSupported, oe)
	}
	return &providerErr{ProviderError: rdma.ProviderError{Provider: provName, Op: op + ": " + oe.Op,
		Errno: int(oe.Errno), Msg: oe.Errno.Error()}, cause: oe}
}

// providerErr is a rdma.ProviderError that also unwraps to its errno.
type providerErr struct {
	rdma.ProviderError
	cause error
}

func (e *providerErr) Unwrap() error { return e.cause }

// As lets errors.As find the embedded *rdma.ProviderError.
func (e *providerErr) As(target any) bool {
	if p, ok := target.(**rdma.ProviderError); ok {
		*p = &e.ProviderError
		return true
	}
	return false
}

// describeEvent implements rdma.Domain.DescribeError. Two failures are the
// peer's (rdma.ErrPeerLost): a handshake that found no answer before its
// deadline, and a work request whose retries ran out (IBV_WC_RETRY_EXC_ERR,
// or RNR_RETRY_EXC_ERR, both EHOSTUNREACH here): the remote HCA stopped
// acknowledging, because its queue pair or the path to it is gone. Flushes
// (ECANCELED) follow from this side's reset of a queue pair, and access or
// length errors from the op itself: neither blames the peer.
func describeEvent(ev rdma.Event) error {
	if ev.Errno == 0 {
		return nil
	}
	if ev.ProvErrno == provErrHandshake {
		return &rdma.ProviderError{Provider: provName, Op: "connect", Errno: int(ev.Errno),
			Msg: "connection handshake did not complete before the deadline", Timeout: true, PeerLost: true}
	}
	if ev.ProvErrno == provErrConnect {
		return &rdma.ProviderError{Provider: provName, Op: "connect", Errno: int(ev.Errno),
			Msg: "could not create or connect the queue pairs"}
	}
	op := ev.Kind.String() + " completion"
	return &rdma.ProviderError{Provider: provName, Op: op, Errno: int(ev.Errno), ProvErrno: int(ev.ProvErrno),
		Msg:         ibv.WCStatusString(int(ev.ProvErrno)) + ": " + syscall.Errno(ev.Errno).Error(),
		PeerLost:    syscall.Errno(ev.Errno) == syscall.EHOSTUNREACH,
		NotReadable: syscall.Errno(ev.Errno) == syscall.EPERM && ev.ProvErrno == ibv.WCRemAccessErr}
}

// provErrConnect marks an Event failed because queue pairs for its peer
// could not be made or connected.
const provErrConnect = -2

func isTimeout(err error) bool {
	var pe *rdma.ProviderError
	return errors.As(err, &pe) && pe.Timeout
}
