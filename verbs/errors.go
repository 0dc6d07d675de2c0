package verbs

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/ibv"
)

// provName is the registry name and the Provider field of every error.
const provName = "verbs"

// provErrHandshake marks an Event failed by a connection deadline (its
// Errno is ETIMEDOUT), as opposed to a work completion's status.
const provErrHandshake = -1

// wrapErr turns a failed verbs call into an error that wraps both
// fabric.ErrProvider (or ErrNotSupported for EOPNOTSUPP/ENOSYS) and the
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
		return fmt.Errorf("verbs: %s: %w: %w", op, fabric.ErrNotSupported, oe)
	}
	return &providerErr{ProviderError: fabric.ProviderError{Provider: provName, Op: op + ": " + oe.Op,
		Errno: int(oe.Errno), Msg: oe.Errno.Error()}, cause: oe}
}

// providerErr is a fabric.ProviderError that also unwraps to its errno.
type providerErr struct {
	fabric.ProviderError
	cause error
}

func (e *providerErr) Unwrap() error { return e.cause }

// As lets errors.As find the embedded *fabric.ProviderError.
func (e *providerErr) As(target any) bool {
	if p, ok := target.(**fabric.ProviderError); ok {
		*p = &e.ProviderError
		return true
	}
	return false
}

// describeEvent implements RdmaDomain.DescribeError.
func describeEvent(ev fabric.Event) error {
	if ev.Errno == 0 {
		return nil
	}
	if ev.ProvErrno == provErrHandshake {
		return &fabric.ProviderError{Provider: provName, Op: "connect", Errno: int(ev.Errno),
			Msg: "connection handshake did not complete before the deadline", Timeout: true}
	}
	if ev.ProvErrno == provErrConnect {
		return &fabric.ProviderError{Provider: provName, Op: "connect", Errno: int(ev.Errno),
			Msg: "could not create or connect the queue pairs"}
	}
	op := ev.Kind.String() + " completion"
	return &fabric.ProviderError{Provider: provName, Op: op, Errno: int(ev.Errno), ProvErrno: int(ev.ProvErrno),
		Msg: ibv.WCStatusString(int(ev.ProvErrno)) + ": " + syscall.Errno(ev.Errno).Error()}
}

// provErrConnect marks an Event failed because queue pairs for its peer
// could not be made or connected.
const provErrConnect = -2

func isTimeout(err error) bool {
	var pe *fabric.ProviderError
	return errors.As(err, &pe) && pe.Timeout
}
