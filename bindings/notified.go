package main

/*
#include <string.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric"
)

// ABI 1.6: requests that carry notifications, the engine's registration
// counts, huge-page host memory.

// notifications translates a C notification array, copying what fabric
// would otherwise share (the payloads are copied again at submit).
func notifications(op string, p *C.ferry_notification, n C.size_t) ([]fabric.Notification, error) {
	if n > maxArray || (n > 0 && p == nil) {
		return nil, errInvalid(op, "%d notifications at %p", uint64(n), p)
	}
	if n == 0 {
		return nil, nil
	}
	cs := unsafe.Slice(p, int(n))
	out := make([]fabric.Notification, len(cs))
	for i, c := range cs {
		if c.mailbox == nil || (c.payload == nil && c.len > 0) {
			return nil, errInvalid(op, "notification %d: nil pointer", i)
		}
		if err := out[i].To.UnmarshalBinary(cBytes(unsafe.Pointer(c.mailbox), c.mailbox_len)); err != nil {
			return nil, fmt.Errorf("%s: notification %d: %w", op, i, err)
		}
		out[i].Payload = cBytes(c.payload, c.len)
	}
	return out, nil
}

//export ferry_submit_notified
func ferry_submit_notified(h C.ferry_engine_t, shape C.int32_t, req unsafe.Pointer, notes *C.ferry_notification, count C.size_t, c C.ferry_completion_t) (rc C.int) {
	defer guard(&rc)
	const op = "submit notified"
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if req == nil {
		return fail(errInvalid(op, "nil request"))
	}
	nts, err := notifications(op, notes, count)
	if err != nil {
		return fail(err)
	}
	if len(nts) == 0 {
		return fail(errInvalid(op, "no notifications"))
	}
	var submit func(fabric.Completion) error
	switch shape {
	case C.FERRY_SHAPE_SINGLE, C.FERRY_SHAPE_PAGED:
		if len(nts) != 1 {
			return fail(errInvalid(op, "%d notifications for a single or paged write, which takes 1", len(nts)))
		}
		if shape == C.FERRY_SHAPE_SINGLE {
			r, err := singleWrite("single write", o, (*C.ferry_single_write)(req))
			if err != nil {
				return fail(err)
			}
			r.Notify = &nts[0]
			submit = func(c fabric.Completion) error { return o.e.SubmitSingle(r, c) }
		} else {
			r, err := pagedWrite("paged write", o, (*C.ferry_paged_write)(req))
			if err != nil {
				return fail(err)
			}
			r.Notify = &nts[0]
			submit = func(c fabric.Completion) error { return o.e.SubmitPaged(r, c) }
		}
	case C.FERRY_SHAPE_SCATTER:
		r, err := scatterWrite("scatter", o, (*C.ferry_scatter_write)(req))
		if err != nil {
			return fail(err)
		}
		r.Notify = nts
		submit = func(c fabric.Completion) error { return o.e.SubmitScatter(r, c) }
	default:
		return fail(errInvalid(op, "shape %d (single, paged or scatter)", int32(shape)))
	}
	comp, err := completionOf(op, c)
	if err != nil {
		return fail(err)
	}
	return result(submit(comp))
}

//export ferry_engine_registration_stats
func ferry_engine_registration_stats(h C.ferry_engine_t, out *C.ferry_registration_stats) (rc C.int) {
	defer guard(&rc)
	const op = "registration stats"
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if out == nil {
		return fail(errInvalid(op, "nil output"))
	}
	var full C.ferry_registration_stats
	n := uintptr(out.struct_size)
	if n < unsafe.Offsetof(full.struct_size)+unsafe.Sizeof(full.struct_size) {
		return fail(errInvalid(op, "struct_size %d: set it to sizeof(ferry_registration_stats)", n))
	}
	s := o.e.RegistrationStats()
	full = C.ferry_registration_stats{struct_size: C.uint32_t(min(n, unsafe.Sizeof(full))),
		groups: C.uint32_t(len(s.Modes)), handles: C.uint64_t(s.Handles),
		registrations: C.uint64_t(s.Registrations), hits: C.uint64_t(s.Hits), misses: C.uint64_t(s.Misses)}
	for i, m := range s.Modes {
		if i < len(full.modes) {
			full.modes[i] = C.int32_t(m)
		}
	}
	C.memcpy(unsafe.Pointer(out), unsafe.Pointer(&full), C.size_t(full.struct_size))
	return C.int(codeOK)
}

//export ferry_host_alloc_with
func ferry_host_alloc_with(size C.size_t, huge C.int32_t, ptr *unsafe.Pointer, pageSize *C.size_t) (rc C.int) {
	defer guard(&rc)
	var mode fabric.HugePages
	switch huge {
	case C.FERRY_HUGE_PAGES_AUTO:
		mode = fabric.HugePagesAuto
	case C.FERRY_HUGE_PAGES_NEVER:
		mode = fabric.HugePagesNever
	case C.FERRY_HUGE_PAGES_REQUIRED:
		mode = fabric.HugePagesRequired
	default:
		return fail(errInvalid("host alloc", "huge-page policy %d", int32(huge)))
	}
	return hostAlloc(size, fabric.HostOptions{HugePages: mode}, ptr, pageSize)
}
