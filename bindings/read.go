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

// Reads (ABI 1.5): the read submits and ferry_expected_imms. The read
// structs name the local region dst and the peer's descriptor src, as
// fabric's read requests do; arrays are copied as for the writes.

// srcDescriptor resolves the descriptor a read pulls from.
func srcDescriptor(op string, h C.ferry_descriptor_t) (fabric.Descriptor, error) {
	d, err := descriptorOf(h)
	if err != nil {
		return fabric.Descriptor{}, fmt.Errorf("%s: source: %w", op, err)
	}
	return *d, nil
}

//export ferry_submit_read
func ferry_submit_read(h C.ferry_engine_t, r *C.ferry_single_read, c C.ferry_completion_t) (rc C.int) {
	defer guard(&rc)
	const op = "single read"
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if r == nil {
		return fail(errInvalid(op, "nil request"))
	}
	req := fabric.SingleRead{DstOffset: uint64(r.dst_offset), Length: uint64(r.length), SrcOffset: uint64(r.src_offset)}
	if req.Dst, err = srcRegion(op, o, r.dst); err != nil {
		return fail(err)
	}
	if req.Src, err = srcDescriptor(op, r.src); err != nil {
		return fail(err)
	}
	if req.Route, err = routing(op, &r.route); err != nil {
		return fail(err)
	}
	comp, err := completionOf(op, c)
	if err != nil {
		return fail(err)
	}
	return result(o.e.SubmitRead(req, comp))
}

//export ferry_submit_paged_read
func ferry_submit_paged_read(h C.ferry_engine_t, r *C.ferry_paged_read, c C.ferry_completion_t) (rc C.int) {
	defer guard(&rc)
	const op = "paged read"
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if r == nil {
		return fail(errInvalid(op, "nil request"))
	}
	req := fabric.PagedRead{DstStride: uint64(r.dst_stride), DstOffset: uint64(r.dst_offset),
		SrcStride: uint64(r.src_stride), SrcOffset: uint64(r.src_offset), Length: uint64(r.length)}
	if req.Dst, err = srcRegion(op, o, r.dst); err != nil {
		return fail(err)
	}
	if req.Src, err = srcDescriptor(op, r.src); err != nil {
		return fail(err)
	}
	if req.DstPages, err = u32s(op, "destination pages", r.dst_pages, r.pages); err != nil {
		return fail(err)
	}
	if req.SrcPages, err = u32s(op, "source pages", r.src_pages, r.pages); err != nil {
		return fail(err)
	}
	comp, err := completionOf(op, c)
	if err != nil {
		return fail(err)
	}
	return result(o.e.SubmitPagedRead(req, comp))
}

//export ferry_submit_scatter_read
func ferry_submit_scatter_read(h C.ferry_engine_t, r *C.ferry_scatter_read, c C.ferry_completion_t) (rc C.int) {
	defer guard(&rc)
	const op = "scatter read"
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if r == nil {
		return fail(errInvalid(op, "nil request"))
	}
	if r.count > maxArray || (r.count > 0 && r.sources == nil) {
		return fail(errInvalid(op, "%d sources at %p", uint64(r.count), r.sources))
	}
	var req fabric.ScatterRead
	if req.Dst, err = srcRegion(op, o, r.dst); err != nil {
		return fail(err)
	}
	if req.Route, err = scatterRouting(&r.route); err != nil {
		return fail(err)
	}
	if r.count > 0 {
		ss := unsafe.Slice(r.sources, int(r.count))
		req.Sources = make([]fabric.ScatterSource, len(ss))
		for i, s := range ss {
			d, err := srcDescriptor(fmt.Sprintf("%s source %d", op, i), s.src)
			if err != nil {
				return fail(err)
			}
			req.Sources[i] = fabric.ScatterSource{Src: d, Length: uint64(s.length),
				SrcOffset: uint64(s.src_offset), DstOffset: uint64(s.dst_offset)}
		}
	}
	comp, err := completionOf(op, c)
	if err != nil {
		return fail(err)
	}
	return result(o.e.SubmitScatterRead(req, comp))
}

//export ferry_expected_imms
func ferry_expected_imms(shape C.int32_t, route *C.ferry_route, count C.int64_t, writerNICs, targetNICs C.int32_t, out *C.int64_t) (rc C.int) {
	defer guard(&rc)
	const op = "expected imms"
	if out == nil {
		return fail(errInvalid(op, "nil output"))
	}
	if writerNICs < 1 || writerNICs > fabric.MaxNICs || targetNICs < 1 || targetNICs > fabric.MaxNICs {
		return fail(errInvalid(op, "%d writer and %d target nics (1 to %d each)", int32(writerNICs), int32(targetNICs), fabric.MaxNICs))
	}
	if count < 0 || count > maxArray {
		return fail(errInvalid(op, "count %d", int64(count)))
	}
	var s fabric.Shape
	switch shape {
	case C.FERRY_SHAPE_SINGLE:
		r, err := routing(op, route)
		if err != nil {
			return fail(err)
		}
		s = fabric.SingleShape(r)
	case C.FERRY_SHAPE_PAGED:
		s = fabric.PagedShape(int(count))
	case C.FERRY_SHAPE_SCATTER:
		r, err := scatterRouting(route)
		if err != nil {
			return fail(err)
		}
		s = fabric.ScatterShape(r, int(count))
	case C.FERRY_SHAPE_IMM:
		s = fabric.ImmShape()
	case C.FERRY_SHAPE_BARRIER:
		s = fabric.BarrierShape(int(count))
	default:
		return fail(errInvalid(op, "shape %d", int32(shape)))
	}
	*out = C.int64_t(fabric.ExpectedImms(s, int(writerNICs), int(targetNICs)))
	return C.int(codeOK)
}
