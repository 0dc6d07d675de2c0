package ipc

import (
	"fmt"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// Error numbers the domain puts in failed completions (Linux values).
const (
	errnoInvalid    = 22  // EINVAL: an operation naming a peer that was never resolved
	errnoAccess     = 13  // EACCES: a range outside the region
	errnoNoKey      = 126 // ENOKEY: the target has no region with the key (unregistered, or never was)
	errnoMsgSize    = 90  // EMSGSIZE: a message larger than the receive buffer or ring
	errnoPeerGone   = 104 // ECONNRESET: the peer process is gone, or its connection broke
	errnoPeerClosed = 108 // ESHUTDOWN: the peer closed its domain, and said so first
	errnoProtocol   = 71  // EPROTO: the peer broke the protocol
	errnoNotSharing = 95  // EOPNOTSUPP: the peer's memory cannot be mapped here
	errnoPerm       = 1   // EPERM: a read of a region registered without remote read
)

func errnoText(errno int32) string {
	switch errno {
	case errnoInvalid:
		return "unknown peer"
	case errnoAccess:
		return "remote access error: range outside the region"
	case errnoNoKey:
		return "remote region unknown: its key was revoked (unregistered) or never registered"
	case errnoMsgSize:
		return "message larger than the receive buffer or the peer's message ring"
	case errnoPeerGone:
		return "peer process gone or its connection broken"
	case errnoPeerClosed:
		return "peer closed its domain"
	case errnoProtocol:
		return "peer broke the ipc protocol"
	case errnoNotSharing:
		return "peer memory cannot be mapped"
	case errnoPerm:
		return "remote region not readable: registered without remote read"
	}
	return fmt.Sprintf("error %d", errno)
}

// describe turns a failed completion into a *rdma.ProviderError; one
// caused by a peer that is gone also matches rdma.ErrPeerLost, so the
// engine declares that peer lost.
func describe(ev rdma.Event) error {
	return &rdma.ProviderError{Provider: TransportName, Op: ev.Kind.String() + " completion",
		Errno: int(ev.Errno), Msg: errnoText(ev.Errno), PeerLost: ev.Errno == errnoPeerGone || ev.Errno == errnoPeerClosed,
		PeerClosed: ev.Errno == errnoPeerClosed, RegionGone: ev.Errno == errnoNoKey,
		NotReadable: ev.Errno == errnoPerm}
}

// errClosed is returned by calls on a closed domain.
var errClosed = fmt.Errorf("ipc domain closed: %w", rdma.ErrClosed)
