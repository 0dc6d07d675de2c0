package main

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"time"
	"unsafe"
)

// This file holds what every exported function shares: turning an error
// into a code plus thread-local text, the panic guard, timeouts and
// output buffers.

// fail records err as the calling thread's last error and returns its code.
// It must run on the thread of the C caller, which is where an exported
// function's body runs (cgo locks the goroutine to the calling thread for
// the duration of the call), so the C thread-local lands with the caller.
func fail(err error) C.int {
	setLastError(err.Error())
	return C.int(codeOf(err))
}

// result is fail for an error that may be nil.
func result(err error) C.int {
	if err == nil {
		return C.int(codeOK)
	}
	return fail(err)
}

func setLastError(msg string) {
	if msg == "" {
		C.ferryp_set_error(nil, 0)
		return
	}
	// C copies the bytes before returning and keeps no pointer.
	C.ferryp_set_error((*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.size_t(len(msg)))
}

// guard turns a panic into FERRY_E_INTERNAL: a panic must never unwind
// into C, which would abort the whole process. Use as
//
//	defer guard(&rc)
func guard(rc *C.int) {
	if p := recover(); p != nil {
		*rc = fail(fmt.Errorf("internal error: %v", p))
	}
}

// errInvalid builds a bad-argument error for op.
func errInvalid(op, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", op, fmt.Sprintf(format, args...), errInvalidArgument)
}

// timeoutCtx turns a C timeout into a context. Negative timeouts are bad
// input: the ABI has no unbounded waits.
func timeoutCtx(op string, ms C.int64_t) (context.Context, context.CancelFunc, error) {
	if ms < 0 {
		return nil, nil, errInvalid(op, "timeout %d ms (want >= 0)", int64(ms))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(ms)*time.Millisecond)
	return ctx, cancel, nil
}

// copyBytes writes data to buf (of capacity cp) and its length to *n,
// which may be nil when buf is large enough.
func copyBytes(op string, data []byte, buf unsafe.Pointer, cp C.size_t, n *C.size_t) error {
	if n != nil {
		*n = C.size_t(len(data))
	}
	if uint64(cp) < uint64(len(data)) || (buf == nil && len(data) > 0) {
		return fmt.Errorf("%s: %d bytes needed, buffer holds %d: %w", op, len(data), uint64(cp), errBufferTooSmall)
	}
	copy(unsafe.Slice((*byte)(buf), len(data)), data)
	return nil
}

// copyText writes s and a NUL to buf; *n (may be nil) gets len(s).
func copyText(op string, s string, buf *C.char, cp C.size_t, n *C.size_t) error {
	if n != nil {
		*n = C.size_t(len(s))
	}
	if buf == nil || uint64(cp) < uint64(len(s))+1 {
		return fmt.Errorf("%s: %d bytes needed with the NUL, buffer holds %d: %w", op, len(s)+1, uint64(cp), errBufferTooSmall)
	}
	out := unsafe.Slice((*byte)(unsafe.Pointer(buf)), len(s)+1)
	copy(out, s)
	out[len(s)] = 0
	return nil
}

// cBytes views n bytes of C memory (nil for an empty or absent buffer).
func cBytes(p unsafe.Pointer, n C.size_t) []byte {
	if p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(p), int(n))
}
