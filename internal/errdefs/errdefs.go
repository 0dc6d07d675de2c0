// Package errdefs holds the error categories every ferry package shares.
// fabric, cuda, a2a and fabric/rendezvous re-export them under their own
// names (fabric.ErrTimeout, cuda.ErrTimeout, ...), which are the same
// values: one errors.Is(err, fabric.ErrTimeout) matches a timeout from any
// of them. Details travel in wrapping errors and typed errors; these are
// only the categories. It imports nothing of ferry's: every layer may use
// it.
package errdefs

import (
	"errors"
	"net"
)

var (
	// ErrClosed is net.ErrClosed (so os and net code recognises it): the
	// object was closed, or is closing.
	ErrClosed = net.ErrClosed
	// ErrNotSupported: this machine, build, driver or provider lacks a
	// feature. Conclusive: retrying will not help.
	ErrNotSupported = errors.New("not supported")
	// ErrTimeout: a deadline or timeout passed before the awaited event.
	ErrTimeout = errors.New("timed out")
	// ErrInvalidArgument: bad input, refused before anything happened.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrBusy: the object is in use by another operation.
	ErrBusy = errors.New("busy")
	// ErrTooLarge: a message or size beyond a configured limit.
	ErrTooLarge = errors.New("too large")
	// ErrPeerLost: a peer (process, rank, endpoint) stopped answering or
	// went away.
	ErrPeerLost = errors.New("peer lost")
)
