package main

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"

	"github.com/ferryrdma/ferry/fabric"
)

// immCounterObj is what a ferry_imm_counter_t names.
type immCounterObj struct {
	eng *engineObj
	imm uint32
	c   *fabric.ImmCounter
}

// Counter registrations and removals of one engine are serialized by its
// mutex, so the owner map always agrees with the engine's counter map.

//export ferry_imm_counter_new
func ferry_imm_counter_new(h C.ferry_engine_t, imm C.uint32_t, out *C.ferry_imm_counter_t) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if out == nil {
		return fail(errInvalid("imm counter", "nil output"))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return fail(fmt.Errorf("imm counter: %w", fabric.ErrClosed))
	}
	c, err := o.e.ImmCounter(uint32(imm))
	if err != nil {
		return fail(err)
	}
	ch := handles.add(&immCounterObj{eng: o, imm: uint32(imm), c: c})
	o.children[ch] = struct{}{}
	o.owner[uint32(imm)] = ch
	*out = C.ferry_imm_counter_t(ch)
	return C.int(codeOK)
}

func immCounterOf(h C.ferry_imm_counter_t) (*immCounterObj, error) {
	return lookup[*immCounterObj](&handles, uint64(h), "imm counter")
}

//export ferry_imm_counter_wait
func ferry_imm_counter_wait(h C.ferry_imm_counter_t, n, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	c, err := immCounterOf(h)
	if err != nil {
		return fail(err)
	}
	if n < 0 {
		return fail(errInvalid("imm counter wait", "%d credits", int64(n)))
	}
	ctx, cancel, err := timeoutCtx("imm counter wait", timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	if err := c.c.Wait(ctx, int64(n)); err != nil {
		return fail(fmt.Errorf("imm counter %#x: wait for %d: %w", c.imm, int64(n), err))
	}
	return C.int(codeOK)
}

//export ferry_imm_counter_count
func ferry_imm_counter_count(h C.ferry_imm_counter_t, count *C.int64_t) (rc C.int) {
	defer guard(&rc)
	c, err := immCounterOf(h)
	if err != nil {
		return fail(err)
	}
	if count == nil {
		return fail(errInvalid("imm counter count", "nil output"))
	}
	*count = C.int64_t(c.c.Count())
	return C.int(codeOK)
}

//export ferry_imm_counter_free
func ferry_imm_counter_free(h C.ferry_imm_counter_t) (rc C.int) {
	defer guard(&rc)
	c, err := release[*immCounterObj](&handles, uint64(h), "imm counter")
	if err != nil {
		return fail(err)
	}
	o := c.eng
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.children, uint64(h))
	if o.owner[c.imm] == uint64(h) {
		delete(o.owner, c.imm)
		o.e.RemoveImmCount(c.imm)
	}
	return C.int(codeOK)
}

//export ferry_expect_imm
func ferry_expect_imm(h C.ferry_engine_t, imm, expected C.uint32_t, fn C.ferry_expect_fn, ud uintptr, prev *C.int64_t) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if fn == nil {
		return fail(errInvalid("expect imm", "nil callback"))
	}
	v := uint32(imm)
	// The callback runs on the engine's dispatcher goroutine, which the
	// trampoline takes into C on whatever OS thread it runs on.
	cb := func() bool { return C.ferryp_call_expect(fn, C.uintptr_t(ud), C.uint32_t(v)) != 0 }
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return fail(fmt.Errorf("expect imm: %w", fabric.ErrClosed))
	}
	p, _, err := o.e.ExpectImm(v, uint32(expected), cb)
	if err != nil {
		return fail(err)
	}
	delete(o.owner, v)
	if prev != nil {
		*prev = C.int64_t(p.Count)
	}
	return C.int(codeOK)
}

//export ferry_remove_imm
func ferry_remove_imm(h C.ferry_engine_t, imm C.uint32_t, prev *C.int64_t) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	p, had := o.e.RemoveImmCount(uint32(imm))
	delete(o.owner, uint32(imm))
	if !had {
		return fail(errInvalid("remove imm", "no counter for %#x", uint32(imm)))
	}
	if prev != nil {
		*prev = C.int64_t(p.Count)
	}
	return C.int(codeOK)
}

//export ferry_on_imm
func ferry_on_imm(h C.ferry_engine_t, fn C.ferry_imm_fn, ud uintptr) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if fn == nil {
		return fail(errInvalid("on imm", "nil callback"))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return fail(fmt.Errorf("on imm: %w", fabric.ErrClosed))
	}
	o.e.OnImm(func(imm uint32) { C.ferryp_call_imm(fn, C.uintptr_t(ud), C.uint32_t(imm)) })
	return C.int(codeOK)
}
