package main

import (
	"context"
	"errors"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/directory"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// The FERRY_E_* codes of ferry.h. errors_test.go checks that both lists
// agree, so the header stays the single public definition.
const (
	codeOK             = 0
	codeInvalid        = -1
	codeClosed         = -2
	codeUnknownRegion  = -3
	codeOutOfBounds    = -4
	codeNotSupported   = -5
	codeTimeout        = -6
	codeProvider       = -7
	codeNICMismatch    = -8
	codeBadEncoding    = -9
	codeNoTransport    = -10
	codeUnknownProv    = -11
	codeBusy           = -12
	codeTooLarge       = -13
	codeRemoved        = -14
	codeBadHandle      = -15
	codeBufferTooSmall = -16
	codeRendezvous     = -17
	codePeerLost       = -18
	codeQueueFull      = -19
	codeAbandoned      = -20
	codeNoMemory       = -21
	codeCallOrder      = -22
	codeBroken         = -23
	codeExpertOverflow = -24
	codeNotFound       = -25
	codeExists         = -26
	codeUnavailable    = -27
	codeStale          = -28
	codeNotLeased      = -29
	codeNotifyTooLarge = -30
	codeLeasesOut      = -31
	// Reads (1.5).
	codeNotReadable = -32
	// Notified requests (1.6).
	codeNotificationsLost = -33
	codeInternal          = -99
)

// Errors the bindings themselves raise, beside fabric's sentinels.
var (
	// errBadHandle is a handle that was never issued, was released, or
	// names an object of another kind.
	errBadHandle = errors.New("bad handle")
	// errBufferTooSmall is an output buffer shorter than the result.
	errBufferTooSmall = errors.New("buffer too small")
	// errInvalidArgument is fabric's, named here for brevity.
	errInvalidArgument = fabric.ErrInvalidArgument
)

// codes maps sentinels to codes, most specific first: a ProviderError
// raised by a protocol deadline wraps both ErrTimeout and ErrProvider, and
// the caller cares that it was a timeout.
var codes = []struct {
	err  error
	code int
}{
	// a2a's own kinds first: a broken context wraps its cause (often a
	// timeout or a lost peer), and the caller must learn that the
	// context needs ferry_a2a_set_active, not that the cause recurred.
	{a2a.ErrBroken, codeBroken},
	// A directory server that could not be reached within the timeout is
	// unavailable, more than the timeout that showed it.
	{errUnavailable, codeUnavailable},
	{a2a.ErrExpertOverflow, codeExpertOverflow},
	{a2a.ErrCallOrder, codeCallOrder},
	{fabric.ErrClosed, codeClosed},
	{fabric.ErrInvalidArgument, codeInvalid},
	{fabric.ErrUnknownRegion, codeUnknownRegion},
	{fabric.ErrOutOfBounds, codeOutOfBounds},
	{fabric.ErrNotSupported, codeNotSupported},
	{fabric.ErrAbandoned, codeAbandoned},
	// Reads (1.5): a refusal the target reports through the provider, so
	// before ErrProvider.
	{fabric.ErrNotReadable, codeNotReadable},
	// Before ErrPeerLost, which every stale-descriptor error also wraps.
	{fabric.ErrStaleDescriptor, codeStale},
	{fabric.ErrPeerLost, codePeerLost},
	{fabric.ErrQueueFull, codeQueueFull},
	{fabric.ErrNoMemory, codeNoMemory},
	{fabric.ErrTimeout, codeTimeout},
	{context.DeadlineExceeded, codeTimeout},
	{fabric.ErrProvider, codeProvider},
	{fabric.ErrNICMismatch, codeNICMismatch},
	{fabric.ErrBadEncoding, codeBadEncoding},
	{fabric.ErrNoTransport, codeNoTransport},
	{fabric.ErrUnknownProvider, codeUnknownProv},
	{fabric.ErrBusy, codeBusy},
	{fabric.ErrNotifyTooLarge, codeNotifyTooLarge},
	{fabric.ErrNotificationsLost, codeNotificationsLost},
	{fabric.ErrNotLeased, codeNotLeased},
	{fabric.ErrLeasesExhausted, codeLeasesOut},
	{fabric.ErrTooLarge, codeTooLarge},
	{fabric.ErrRemoved, codeRemoved},
	{errBadHandle, codeBadHandle},
	// rendezvous shares fabric's categories (its ErrTimeout is
	// fabric.ErrTimeout, its ErrInvalidConfig wraps ErrInvalidArgument):
	// only its own kinds need rows. A lost rank is ErrPeerLost, the same
	// category as a lost fabric peer.
	{rendezvous.ErrAuth, codeRendezvous},
	{rendezvous.ErrRejected, codeRendezvous},
	{rendezvous.ErrProtocol, codeRendezvous},
	{errBufferTooSmall, codeBufferTooSmall},
	// The directory's kinds (1.3). A stored entry that failed validation
	// reaches here already wrapped in ErrBadEncoding or ErrNICMismatch
	// (dirError), which match first.
	{directory.ErrNotFound, codeNotFound},
	{directory.ErrExists, codeExists},
	{directory.ErrClosed, codeClosed},
	{directory.ErrTooLarge, codeTooLarge},
	{directory.ErrNICMismatch, codeNICMismatch},
	{directory.ErrInvalid, codeInvalid},
}

// codeOf returns the FERRY_E_* code for err (codeOK for nil). Errors that
// wrap none of the sentinels (an mmap failure, a recovered panic) are
// codeInternal: their message still says what happened.
func codeOf(err error) int {
	if err == nil {
		return codeOK
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return codeInternal
}

// errUnavailable is a directory server that could not be reached.
var errUnavailable = errors.New("directory unavailable")
