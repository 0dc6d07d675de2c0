package main

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric"
)

// leaseObj is what a ferry_lease_t names.
type leaseObj struct {
	eng *engineObj
	l   *fabric.Lease
}

func leaseOf(h C.ferry_lease_t) (*leaseObj, error) {
	return lookup[*leaseObj](&handles, uint64(h), "lease")
}

//export ferry_lease_imms
func ferry_lease_imms(h C.ferry_engine_t, n C.uint32_t, out *C.ferry_lease_t, first *C.uint32_t) (rc C.int) {
	defer guard(&rc)
	const op = "lease imms"
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if out == nil {
		return fail(errInvalid(op, "nil output"))
	}
	if n > C.FERRY_MAX_LEASE_IMMS {
		return fail(errInvalid(op, "%d values, at most %d", uint32(n), fabric.MaxLeaseImms))
	}
	l, err := o.e.LeaseImms(int(n))
	if err != nil {
		return fail(err)
	}
	lh := handles.add(&leaseObj{eng: o, l: l})
	if !o.adopt(lh) {
		handles.remove(lh)
		_ = l.Retire()
		return fail(fmt.Errorf("%s: %w", op, fabric.ErrClosed))
	}
	*out = C.ferry_lease_t(lh)
	if first != nil {
		*first = C.uint32_t(l.First())
	}
	return C.int(codeOK)
}

//export ferry_lease_retire
func ferry_lease_retire(h C.ferry_lease_t) (rc C.int) {
	defer guard(&rc)
	l, err := leaseOf(h)
	if err != nil {
		return fail(err)
	}
	l.eng.disown(uint64(h))
	handles.remove(uint64(h))
	return result(l.l.Retire())
}

//export ferry_lease_mailbox
func ferry_lease_mailbox(h C.ferry_lease_t, buf *C.uint8_t, cp C.size_t, n *C.size_t) (rc C.int) {
	defer guard(&rc)
	l, err := leaseOf(h)
	if err != nil {
		return fail(err)
	}
	mb, err := l.l.Mailbox()
	if err != nil {
		return fail(err)
	}
	b, err := mb.MarshalBinary()
	if err != nil {
		return fail(err)
	}
	return result(copyBytes("lease mailbox", b, unsafe.Pointer(buf), cp, n))
}

//export ferry_notify
func ferry_notify(h C.ferry_engine_t, mailbox *C.uint8_t, mailboxLen C.size_t, payload unsafe.Pointer, n C.size_t, c C.ferry_completion_t) (rc C.int) {
	defer guard(&rc)
	const op = "notify"
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if mailbox == nil || (payload == nil && n > 0) {
		return fail(errInvalid(op, "nil pointer"))
	}
	var to fabric.Mailbox
	if err := to.UnmarshalBinary(cBytes(unsafe.Pointer(mailbox), mailboxLen)); err != nil {
		return fail(err)
	}
	comp, err := completionOf(op, c)
	if err != nil {
		return fail(err)
	}
	// SubmitNotification copies the payload before it returns.
	return result(o.e.SubmitNotification(fabric.Notification{To: to, Payload: cBytes(payload, n)}, comp))
}

//export ferry_lease_wait_notification
func ferry_lease_wait_notification(h C.ferry_lease_t, timeoutMS C.int64_t, buf unsafe.Pointer, cp C.size_t, n *C.size_t, seq *C.uint64_t) (rc C.int) {
	defer guard(&rc)
	const op = "lease wait notification"
	l, err := leaseOf(h)
	if err != nil {
		return fail(err)
	}
	ctx, cancel, err := timeoutCtx(op, timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	note, err := l.l.WaitNotification(ctx)
	if err != nil {
		return fail(err)
	}
	if seq != nil {
		*seq = C.uint64_t(note.Seq)
	}
	return result(copyBytes(op, note.Payload, buf, cp, n))
}

//export ferry_engine_drops
func ferry_engine_drops(h C.ferry_engine_t, imms, notes *C.uint64_t) (rc C.int) {
	defer guard(&rc)
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	s := o.e.Stats()
	if imms != nil {
		*imms = C.uint64_t(s.ImmsDropped)
	}
	if notes != nil {
		*notes = C.uint64_t(s.NotificationsDropped)
	}
	return C.int(codeOK)
}
