package ipc

import (
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/fabric"
)

// ErrPeerGone is wrapped by every error caused by a peer process that
// exited, crashed or closed its domain: operations held for it fail with
// it, and new operations to it complete with it. It is a provider error
// too: errors.Is(err, fabric.ErrProvider) holds.
var ErrPeerGone = errors.New("ipc peer gone")

// Error numbers the domain puts in failed completions (Linux values).
const (
	errnoInvalid    = 22  // EINVAL: an operation naming a peer that was never resolved
	errnoAccess     = 13  // EACCES: unknown or revoked key, range outside the region
	errnoMsgSize    = 90  // EMSGSIZE: a message larger than the receive buffer or ring
	errnoPeerGone   = 104 // ECONNRESET: the peer process is gone or closed its domain
	errnoProtocol   = 71  // EPROTO: the peer broke the protocol
	errnoNotSharing = 95  // EOPNOTSUPP: the peer's memory cannot be mapped here
)

func errnoText(errno int32) string {
	switch errno {
	case errnoInvalid:
		return "unknown peer"
	case errnoAccess:
		return "remote access error: key unknown or revoked, or range outside the region"
	case errnoMsgSize:
		return "message larger than the receive buffer or the peer's message ring"
	case errnoPeerGone:
		return "peer process gone or its domain closed"
	case errnoProtocol:
		return "peer broke the ipc protocol"
	case errnoNotSharing:
		return "peer memory cannot be mapped"
	}
	return fmt.Sprintf("error %d", errno)
}

func describe(ev fabric.Event) error {
	pe := &fabric.ProviderError{Provider: TransportName, Op: ev.Kind.String() + " completion",
		Errno: int(ev.Errno), Msg: errnoText(ev.Errno)}
	if ev.Errno == errnoPeerGone {
		return &peerGoneError{pe}
	}
	return pe
}

// peerGoneError is a ProviderError that also matches ErrPeerGone.
type peerGoneError struct{ *fabric.ProviderError }

func (e *peerGoneError) Unwrap() error { return e.ProviderError }

func (e *peerGoneError) Is(target error) bool { return target == ErrPeerGone }

// errClosed is returned by calls on a closed domain.
var errClosed = fmt.Errorf("ipc domain closed: %w", fabric.ErrClosed)
