package main

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric"
)

// The submit functions translate C structs into fabric requests: handles
// become regions, descriptors and completions; C arrays are copied,
// because fabric shares the slices it is given until the transfer ends
// and C callers expect to reuse their arrays at once. fabric validates
// everything else (bounds, NIC counts, routes) before anything is queued.

// maxArray bounds the C arrays a submit copies: far beyond any real
// request, it turns a garbage count into FERRY_E_INVALID rather than an
// attempt to copy terabytes.
const maxArray = 1 << 24

func routing(op string, r *C.ferry_route) (fabric.Routing, error) {
	if r == nil {
		return fabric.Routing{}, nil
	}
	switch r.kind {
	case C.FERRY_ROUTE_SHARDED:
		return fabric.Sharded(int(r.value)), nil
	case C.FERRY_ROUTE_PINNED:
		return fabric.Pinned(int(r.value)), nil
	}
	return fabric.Routing{}, errInvalid(op, "route kind %d", int32(r.kind))
}

func scatterRouting(r *C.ferry_route) (fabric.ScatterRouting, error) {
	if r == nil {
		return fabric.ShardPeers(), nil
	}
	switch r.kind {
	case C.FERRY_ROUTE_SHARDED:
		if r.value != 0 {
			return fabric.ScatterRouting{}, errInvalid("scatter", "sharded scatter uses every NIC (value %d, want 0)", int32(r.value))
		}
		return fabric.ShardPeers(), nil
	case C.FERRY_ROUTE_PINNED:
		return fabric.ScatterPinned(int(r.value)), nil
	case C.FERRY_ROUTE_SHARD_BYTES:
		return fabric.ShardBytes(), nil
	}
	return fabric.ScatterRouting{}, errInvalid("scatter", "route kind %d", int32(r.kind))
}

// srcRegion resolves a source region handle for engine o.
func srcRegion(op string, o *engineObj, h C.ferry_region_t) (*fabric.MemoryRegion, error) {
	r, err := regionOf(op, h)
	if err != nil {
		return nil, err
	}
	if r.eng != o {
		return nil, fmt.Errorf("%s: region %d belongs to another engine: %w", op, uint64(h), fabric.ErrUnknownRegion)
	}
	return r.r, nil
}

func dstDescriptor(op string, h C.ferry_descriptor_t) (fabric.Descriptor, error) {
	d, err := descriptorOf(h)
	if err != nil {
		return fabric.Descriptor{}, fmt.Errorf("%s: destination: %w", op, err)
	}
	return *d, nil
}

func u32s(op, what string, p *C.uint32_t, n C.size_t) ([]uint32, error) {
	if n > maxArray {
		return nil, errInvalid(op, "%d %s", uint64(n), what)
	}
	if n == 0 {
		return nil, nil
	}
	if p == nil {
		return nil, errInvalid(op, "nil %s with count %d", what, uint64(n))
	}
	return slices.Clone(unsafe.Slice((*uint32)(unsafe.Pointer(p)), int(n))), nil
}

// singleWrite translates a C single write for engine o.
func singleWrite(op string, o *engineObj, w *C.ferry_single_write) (fabric.SingleWrite, error) {
	if w == nil {
		return fabric.SingleWrite{}, errInvalid(op, "nil request")
	}
	req := fabric.SingleWrite{SrcOffset: uint64(w.src_offset), Length: uint64(w.length),
		DstOffset: uint64(w.dst_offset), Imm: cImm(w.has_imm, w.imm)}
	var err error
	if req.Src, err = srcRegion(op, o, w.src); err != nil {
		return req, err
	}
	if req.Dst, err = dstDescriptor(op, w.dst); err != nil {
		return req, err
	}
	req.Route, err = routing(op, &w.route)
	return req, err
}

// pagedWrite translates a C paged write for engine o, copying the page
// arrays.
func pagedWrite(op string, o *engineObj, w *C.ferry_paged_write) (fabric.PagedWrite, error) {
	if w == nil {
		return fabric.PagedWrite{}, errInvalid(op, "nil request")
	}
	req := fabric.PagedWrite{SrcStride: uint64(w.src_stride), SrcOffset: uint64(w.src_offset),
		DstStride: uint64(w.dst_stride), DstOffset: uint64(w.dst_offset), Length: uint64(w.length),
		Imm: cImm(w.has_imm, w.imm)}
	var err error
	if req.Src, err = srcRegion(op, o, w.src); err != nil {
		return req, err
	}
	if req.Dst, err = dstDescriptor(op, w.dst); err != nil {
		return req, err
	}
	if req.SrcPages, err = u32s(op, "source pages", w.src_pages, w.pages); err != nil {
		return req, err
	}
	req.DstPages, err = u32s(op, "destination pages", w.dst_pages, w.pages)
	return req, err
}

// scatterWrite translates a C scatter for engine o, copying the targets.
func scatterWrite(op string, o *engineObj, w *C.ferry_scatter_write) (fabric.ScatterWrite, error) {
	if w == nil {
		return fabric.ScatterWrite{}, errInvalid(op, "nil request")
	}
	if w.count > maxArray || (w.count > 0 && w.targets == nil) {
		return fabric.ScatterWrite{}, errInvalid(op, "%d targets at %p", uint64(w.count), w.targets)
	}
	req := fabric.ScatterWrite{Imm: cImm(w.has_imm, w.imm)}
	var err error
	if req.Src, err = srcRegion(op, o, w.src); err != nil {
		return req, err
	}
	if req.Route, err = scatterRouting(&w.route); err != nil {
		return req, err
	}
	if w.count > 0 {
		ts := unsafe.Slice(w.targets, int(w.count))
		req.Targets = make([]fabric.ScatterTarget, len(ts))
		for i, t := range ts {
			d, err := dstDescriptor(fmt.Sprintf("%s target %d", op, i), t.dst)
			if err != nil {
				return req, err
			}
			req.Targets[i] = fabric.ScatterTarget{Dst: d, Length: uint64(t.length),
				SrcOffset: uint64(t.src_offset), DstOffset: uint64(t.dst_offset)}
		}
	}
	return req, nil
}

// submitWrite checks and builds a write request from its C form, then
// submits it: the steps every ferry_submit_* of a write struct shares.
// build and submit are plain funcs and method values of no receiver
// state, so nothing is allocated per call.
func submitWrite[W, R any](op string, h C.ferry_engine_t, w W, c C.ferry_completion_t,
	build func(string, *engineObj, W) (R, error), submit func(*fabric.Engine, R, fabric.Completion) error) C.int {
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	req, err := build(op, o, w)
	if err != nil {
		return fail(err)
	}
	comp, err := completionOf(op, c)
	if err != nil {
		return fail(err)
	}
	return result(submit(o.e, req, comp))
}

//export ferry_submit_single
func ferry_submit_single(h C.ferry_engine_t, w *C.ferry_single_write, c C.ferry_completion_t) (rc C.int) {
	defer guard(&rc)
	return submitWrite("single write", h, w, c, singleWrite, (*fabric.Engine).SubmitSingle)
}

//export ferry_submit_paged
func ferry_submit_paged(h C.ferry_engine_t, w *C.ferry_paged_write, c C.ferry_completion_t) (rc C.int) {
	defer guard(&rc)
	return submitWrite("paged write", h, w, c, pagedWrite, (*fabric.Engine).SubmitPaged)
}

//export ferry_submit_scatter
func ferry_submit_scatter(h C.ferry_engine_t, w *C.ferry_scatter_write, c C.ferry_completion_t) (rc C.int) {
	defer guard(&rc)
	return submitWrite("scatter", h, w, c, scatterWrite, (*fabric.Engine).SubmitScatter)
}

//export ferry_submit_imm
func ferry_submit_imm(h C.ferry_engine_t, imm C.uint32_t, dst C.ferry_descriptor_t, route *C.ferry_route, c C.ferry_completion_t) (rc C.int) {
	defer guard(&rc)
	const op = "imm write"
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	req := fabric.ImmWrite{Imm: uint32(imm)}
	if req.Dst, err = dstDescriptor(op, dst); err != nil {
		return fail(err)
	}
	if req.Route, err = routing(op, route); err != nil {
		return fail(err)
	}
	comp, err := completionOf(op, c)
	if err != nil {
		return fail(err)
	}
	return result(o.e.SubmitImm(req, comp))
}

//export ferry_submit_barrier
func ferry_submit_barrier(h C.ferry_engine_t, imm C.uint32_t, dsts *C.ferry_descriptor_t, n C.size_t, route *C.ferry_route, c C.ferry_completion_t) (rc C.int) {
	defer guard(&rc)
	const op = "barrier"
	o, err := engineOf(h)
	if err != nil {
		return fail(err)
	}
	if n > maxArray || (n > 0 && dsts == nil) {
		return fail(errInvalid(op, "%d destinations at %p", uint64(n), dsts))
	}
	req := fabric.Barrier{Imm: uint32(imm)}
	if n > 0 {
		hs := unsafe.Slice(dsts, int(n))
		req.Dsts = make([]fabric.Descriptor, len(hs))
		for i, dh := range hs {
			if req.Dsts[i], err = dstDescriptor(fmt.Sprintf("%s destination %d", op, i), dh); err != nil {
				return fail(err)
			}
		}
	}
	if req.Route, err = routing(op, route); err != nil {
		return fail(err)
	}
	comp, err := completionOf(op, c)
	if err != nil {
		return fail(err)
	}
	return result(o.e.SubmitBarrier(req, comp))
}

// cImm turns the C ABI's (has_imm, imm) pair into the Go request's Imm:
// has_imm zero means no immediate, whatever imm holds.
func cImm(has C.int32_t, v C.uint32_t) fabric.Imm {
	if has == 0 {
		return fabric.Imm{}
	}
	return fabric.Immediate(uint32(v))
}
