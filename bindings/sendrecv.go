package main

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"unsafe"

	"github.com/ferryrdma/ferry/fabric"
)

//export ferry_send
func ferry_send(h C.ferry_engine_t, addr *C.uint8_t, addrLen C.size_t, data unsafe.Pointer, n C.size_t, c C.ferry_completion_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	const op = "send"
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if addr == nil || (data == nil && n > 0) {
		return fail(errInvalid(op, "nil pointer"))
	}
	var to fabric.Address
	if err := to.UnmarshalBinary(cBytes(unsafe.Pointer(addr), addrLen)); err != nil {
		return fail(err)
	}
	comp, err := completionOf(op, c)
	if err != nil {
		return fail(err)
	}
	ctx, cancel, err := timeoutCtx(op, timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	// Send copies the bytes into a registered buffer before it returns,
	// so viewing the caller's C memory for the call is enough.
	return result(o.e.Send(ctx, to, cBytes(data, n), comp))
}

//export ferry_recv_bouncing
func ferry_recv_bouncing(h C.ferry_engine_t, count, size C.int32_t, onData C.ferry_recv_fn, onErr C.ferry_error_fn, ud uintptr) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if onData == nil {
		return fail(errInvalid("recv bouncing", "nil data callback"))
	}
	// The message is Go memory without pointers: C may read it during the
	// call (cgo allows that) and must not keep it, as ferry.h says.
	data := func(b []byte) {
		C.ferryp_call_recv(onData, C.uintptr_t(ud), unsafe.Pointer(unsafe.SliceData(b)), C.size_t(len(b)))
	}
	var errFn func(error)
	if onErr != nil {
		errFn = func(err error) {
			msg := C.CString(err.Error())
			defer C.free(unsafe.Pointer(msg))
			C.ferryp_call_error(onErr, C.uintptr_t(ud), C.int(codeOf(err)), msg)
		}
	}
	return result(o.e.BouncingRecvs(int(count), int(size), data, errFn))
}
