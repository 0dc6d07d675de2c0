package main

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"

	"github.com/ferryrdma/ferry/fabric"
)

// Transfers and transfer counters are plain fabric objects behind handles;
// a submit turns the completion handle into the fabric.Completion that
// names them.

// completionOf resolves a ferry_completion_t: 0, a transfer or a counter.
func completionOf(op string, h C.ferry_completion_t) (fabric.Completion, error) {
	if h == 0 {
		return fabric.Completion{}, nil
	}
	v, ok := handles.m.Load(uint64(h))
	if ok {
		switch o := v.(type) {
		case *fabric.Transfer:
			return fabric.Notify(o), nil
		case *fabric.TransferCounter:
			return fabric.Count(o), nil
		case *callbackObj:
			return o.c, nil
		}
	}
	return fabric.Completion{}, fmt.Errorf("%s: completion handle %d is not a transfer, counter or callback: %w", op, uint64(h), errBadHandle)
}

// callbackObj is what a ferry_callback_t names: the fabric completion is
// built once, so submitting with it allocates nothing more.
type callbackObj struct{ c fabric.Completion }

//export ferry_callback_new
func ferry_callback_new(fn C.ferry_done_fn, ud uintptr, out *C.ferry_callback_t) (rc C.int) {
	defer guard(&rc)
	if fn == nil || out == nil {
		return fail(errInvalid("callback new", "nil function or output"))
	}
	// Runs on the dispatcher goroutine of the engine the transfer ran on.
	c := fabric.OnDone(func(err error) { C.ferryp_call_done(fn, C.uintptr_t(ud), C.int(codeOf(err))) })
	*out = C.ferry_callback_t(handles.add(&callbackObj{c: c}))
	return C.int(codeOK)
}

//export ferry_callback_free
func ferry_callback_free(h C.ferry_callback_t) (rc C.int) {
	defer guard(&rc)
	_, err := release[*callbackObj](&handles, uint64(h), "callback")
	return result(err)
}

//export ferry_transfer_new
func ferry_transfer_new(out *C.ferry_transfer_t) (rc C.int) {
	defer guard(&rc)
	if out == nil {
		return fail(errInvalid("transfer new", "nil output"))
	}
	*out = C.ferry_transfer_t(handles.add(fabric.NewTransfer()))
	return C.int(codeOK)
}

//export ferry_transfer_wait
func ferry_transfer_wait(h C.ferry_transfer_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	t, err := lookup[*fabric.Transfer](&handles, uint64(h), "transfer")
	if err != nil {
		return fail(err)
	}
	ctx, cancel, err := timeoutCtx("transfer wait", timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	return result(t.Wait(ctx))
}

//export ferry_transfer_free
func ferry_transfer_free(h C.ferry_transfer_t) (rc C.int) {
	defer guard(&rc)
	_, err := release[*fabric.Transfer](&handles, uint64(h), "transfer")
	return result(err)
}

//export ferry_counter_new
func ferry_counter_new(out *C.ferry_counter_t) (rc C.int) {
	defer guard(&rc)
	if out == nil {
		return fail(errInvalid("counter new", "nil output"))
	}
	*out = C.ferry_counter_t(handles.add(new(fabric.TransferCounter)))
	return C.int(codeOK)
}

//export ferry_counter_read
func ferry_counter_read(h C.ferry_counter_t, done, errs *C.int64_t) (rc C.int) {
	defer guard(&rc)
	c, err := lookup[*fabric.TransferCounter](&handles, uint64(h), "counter")
	if err != nil {
		return fail(err)
	}
	// Done first: a transfer adds to errors before done, so once done
	// counts a failure, the errors read after it counts it too.
	if done != nil {
		*done = C.int64_t(c.Done())
	}
	if errs != nil {
		*errs = C.int64_t(c.Errors())
	}
	return C.int(codeOK)
}

//export ferry_counter_wait
func ferry_counter_wait(h C.ferry_counter_t, n, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	c, err := lookup[*fabric.TransferCounter](&handles, uint64(h), "counter")
	if err != nil {
		return fail(err)
	}
	ctx, cancel, err := timeoutCtx("counter wait", timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	if err := c.Wait(ctx, int64(n)); err != nil {
		return fail(fmt.Errorf("counter wait for %d: %w", int64(n), err))
	}
	return C.int(codeOK)
}

//export ferry_counter_free
func ferry_counter_free(h C.ferry_counter_t) (rc C.int) {
	defer guard(&rc)
	_, err := release[*fabric.TransferCounter](&handles, uint64(h), "counter")
	return result(err)
}

//export ferry_live_handles
func ferry_live_handles(count *C.uint64_t) (rc C.int) {
	defer guard(&rc)
	if count == nil {
		return fail(errInvalid("live handles", "nil output"))
	}
	*count = C.uint64_t(handles.len())
	return C.int(codeOK)
}
