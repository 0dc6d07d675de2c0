package shm

import "errors"

var (
	// ErrNotSealed: a peer's memory file could be shrunk under a mapping.
	ErrNotSealed = errors.New("memory file not sealed against shrinking")
	// ErrTooSmall: a peer's memory file is shorter than what will be mapped.
	ErrTooSmall = errors.New("memory file too small")
	// ErrMalformed: a message did not fit the buffers given to Receive
	// (longer than the buffer, or more descriptors than allowed).
	ErrMalformed = errors.New("malformed message")
	// ErrTimeout: a send or receive ended with its context (deadline or
	// cancellation) before the peer acted.
	ErrTimeout = errors.New("timed out")
	// ErrNotSupported: this platform lacks memory files.
	ErrNotSupported = errors.New("not supported on this platform")
)
