package a2a

import (
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/internal/errdefs"
)

// Sentinel errors. Every error this package returns wraps one of them, so
// errors.Is tells the category; the typed errors below carry the details.
// ErrClosed, ErrTimeout, ErrBusy and ErrInvalidArgument are the categories
// every ferry package shares (fabric.ErrTimeout is a2a.ErrTimeout), and
// ErrInvalidConfig is a kind of ErrInvalidArgument. The planner, oracle and
// state machine do not import fabric, so they build and test on their own.
var (
	// ErrInvalidConfig is a Config that fails validation (see ConfigError).
	// It wraps ErrInvalidArgument.
	ErrInvalidConfig = fmt.Errorf("invalid a2a config: %w", errdefs.ErrInvalidArgument)
	// ErrInvalidArgument is a call argument that fails validation before
	// anything was sent (see ArgumentError).
	ErrInvalidArgument = errdefs.ErrInvalidArgument
	// ErrCallOrder is a call that the dispatch/combine state machine does not
	// allow in the current state (see OrderError). The context is unchanged.
	ErrCallOrder = errors.New("a2a call out of order")
	// ErrBusy is a call made while another call on the same Context runs.
	ErrBusy = errdefs.ErrBusy
	// ErrBroken is returned by every call after a backend failure left the
	// protocol in an unknown state; only Close and SetActiveRanks (which
	// resynchronises the members) are still useful.
	ErrBroken = errors.New("a2a context broken by an earlier failure")
	// ErrClosed is returned by every call after Close.
	ErrClosed = errdefs.ErrClosed
	// ErrTimeout is a wait whose context ended before its peers delivered.
	ErrTimeout = errdefs.ErrTimeout
	// ErrNotSupported is a request the backend cannot serve.
	ErrNotSupported = errdefs.ErrNotSupported
	// ErrPeerLost is a rank the transport declared lost (its process died,
	// its connection broke, it stopped answering): see RankError.
	ErrPeerLost = errdefs.ErrPeerLost
	// ErrExpertOverflow is a dispatch in the batched layout
	// (Config.MaxTokensPerExpert) that routed more copies to one expert
	// than the bound. Every rank sees the whole count table, so every rank
	// fails that dispatch with it (none waits for a timeout); the context
	// is then broken, as after any failure of the exchange.
	ErrExpertOverflow = errors.New("a2a expert over its max tokens")
)

// RankError names the rank a call failed on: the transport declared it
// lost while this rank waited for it or wrote to it. It wraps the
// transport's error (errors.Is ErrPeerLost).
type RankError struct {
	Rank int
	Err  error
}

func (e *RankError) Error() string { return fmt.Sprintf("a2a: rank %d lost: %v", e.Rank, e.Err) }

// Unwrap returns the transport's error.
func (e *RankError) Unwrap() error { return e.Err }

// ConfigError says which Config field is wrong and why. It wraps
// ErrInvalidConfig.
type ConfigError struct {
	Field  string // the Config field, e.g. "NVLinkSize"
	Value  int64  // the offending value
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("a2a config: %s = %d: %s", e.Field, e.Value, e.Reason)
}

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

func cfgErr(field string, v int64, format string, args ...any) error {
	return &ConfigError{Field: field, Value: v, Reason: fmt.Sprintf(format, args...)}
}

// ArgumentError is a bad argument to a call. It wraps ErrInvalidArgument.
type ArgumentError struct {
	Op     string // "dispatch send", "plan recv", ...
	Arg    string // the argument, e.g. "Indices"
	Reason string
}

func (e *ArgumentError) Error() string {
	return "a2a " + e.Op + ": " + e.Arg + ": " + e.Reason
}

// Unwrap returns ErrInvalidArgument.
func (e *ArgumentError) Unwrap() error { return ErrInvalidArgument }

func argErr(op, arg, format string, args ...any) error {
	return &ArgumentError{Op: op, Arg: arg, Reason: fmt.Sprintf(format, args...)}
}

// OrderError is a call the state machine refuses. It wraps ErrCallOrder.
type OrderError struct {
	Call  string // the refused call
	State string // the state the context is in
	Want  string // the calls allowed in that state
}

func (e *OrderError) Error() string {
	return "a2a: " + e.Call + " not allowed after " + e.State + " (next: " + e.Want + ")"
}

// Unwrap returns ErrCallOrder.
func (e *OrderError) Unwrap() error { return ErrCallOrder }
