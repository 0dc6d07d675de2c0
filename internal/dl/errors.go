package dl

import (
	"strings"

	"github.com/ferryrdma/ferry/internal/errdefs"
)

// ErrNotSupported is the shared category (fabric.ErrNotSupported and
// cuda.ErrNotSupported are the same value): a library or symbol that is
// not on this machine.
var ErrNotSupported = errdefs.ErrNotSupported

// ErrClosed is returned by Lookup on a library that is not open.
var ErrClosed = errdefs.ErrClosed

// ErrBusy is returned by SetCandidates while the library is open.
var ErrBusy = errdefs.ErrBusy

// Error is a failed dlopen, dlsym or dlclose. Msg keeps the dlerror text.
type Error struct {
	Op   string // "open", "lookup", "close"
	Name string // library or symbol name
	Msg  string // dlerror text, one entry per candidate for open
	Err  error  // the sentinel it wraps
}

func (e *Error) Error() string {
	return "dl: " + e.Op + " " + e.Name + ": " + e.Msg
}

// Unwrap returns the sentinel: ErrNotSupported for open and lookup
// failures, ErrClosed for a lookup on a closed library.
func (e *Error) Unwrap() error { return e.Err }

// joinMsgs formats one "candidate: reason" entry per failed candidate.
func joinMsgs(msgs []string) string {
	if len(msgs) == 0 {
		return "no candidate paths"
	}
	return strings.Join(msgs, "; ")
}

// failure is one candidate that did not open, with the dlerror text.
type failure struct{ candidate, msg string }

// groupFailures reports candidates that failed for the same reason
// together ("reason (a, b, c)"), so that twenty paths that do not exist
// take one line while a library that exists but cannot load (wrong
// architecture, missing dependency) stands out with its own reason.
func groupFailures(fails []failure) string {
	if len(fails) == 0 {
		return "no candidate paths"
	}
	var order []string
	byReason := map[string][]string{}
	for _, f := range fails {
		reason := strings.TrimPrefix(f.msg, f.candidate+": ")
		if _, ok := byReason[reason]; !ok {
			order = append(order, reason)
		}
		byReason[reason] = append(byReason[reason], f.candidate)
	}
	parts := make([]string, len(order))
	for i, r := range order {
		parts[i] = r + " (" + strings.Join(byReason[r], ", ") + ")"
	}
	return strings.Join(parts, "; ")
}
