package rendezvous

import (
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/internal/errdefs"
)

// Sentinel errors. Every error this package returns wraps one of them.
// ErrTimeout, ErrTooLarge, ErrPeerLost and ErrClosed are the categories
// every ferry package shares (fabric.ErrTimeout is rendezvous.ErrTimeout),
// and ErrInvalidConfig is a kind of fabric.ErrInvalidArgument.
var (
	// ErrInvalidConfig is a Config that cannot work: rank outside the
	// world, no token, an address that is not loopback without AllowRemote.
	ErrInvalidConfig = fmt.Errorf("invalid rendezvous config: %w", errdefs.ErrInvalidArgument)
	// ErrTimeout is a deadline that passed before every rank arrived.
	ErrTimeout = errdefs.ErrTimeout
	// ErrAuth is a joiner that presented the wrong job token.
	ErrAuth = errors.New("rendezvous authentication failed")
	// ErrRejected is a joiner refused by rank 0 for its rank or world size.
	ErrRejected = errors.New("rendezvous join rejected")
	// ErrProtocol is a malformed, truncated or out-of-order message, or
	// ranks calling different collectives.
	ErrProtocol = errors.New("rendezvous protocol error")
	// ErrTooLarge is a message over the size limit.
	ErrTooLarge = errdefs.ErrTooLarge
	// ErrPeerLost is a connection to rank 0, or of a rank to rank 0, that
	// closed before the job did.
	ErrPeerLost = errdefs.ErrPeerLost
	// ErrClosed is returned by calls on a closed Group; it is net.ErrClosed.
	ErrClosed = errdefs.ErrClosed
)

// Error is a failed rendezvous operation. It wraps one sentinel.
type Error struct {
	Op   string // "join", "allgather", "broadcast", "barrier", "spawn"
	Rank int    // the rank reporting it
	// Missing are the ranks rank 0 was still waiting for, when known.
	Missing []int
	Msg     string
	Err     error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("rendezvous: rank %d %s: ", e.Rank, e.Op)
	if e.Msg != "" {
		s += e.Msg + ": "
	}
	return s + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Error codes on the wire, one per sentinel a remote side can report.
const (
	codeAuth uint8 = iota + 1
	codeRejected
	codeTimeout
	codeProtocol
	codeTooLarge
	codePeerLost
)

var codeErrs = map[uint8]error{
	codeAuth: ErrAuth, codeRejected: ErrRejected, codeTimeout: ErrTimeout,
	codeProtocol: ErrProtocol, codeTooLarge: ErrTooLarge, codePeerLost: ErrPeerLost,
}

func codeOf(err error) uint8 {
	for c, s := range codeErrs {
		if errors.Is(err, s) {
			return c
		}
	}
	return codeProtocol
}
