package fabric

import "math/bits"

// Submission: validation happens here, in the caller's goroutine, so bad
// input is refused synchronously with a typed error and nothing is queued;
// the worker then only expands and posts.

// SubmitImm posts an immediate-only write through the main worker.
func (e *Engine) SubmitImm(r ImmWrite, c Completion) error {
	if e == nil {
		return errNilEngine
	}
	w := e.main()
	if err := checkRoute("imm write", r.Route, len(w.doms)); err != nil {
		return err
	}
	if err := checkDesc("imm write", &r.Dst, len(w.doms)); err != nil {
		return err
	}
	q := request{kind: reqImm, c: c, imm: r.Imm, hasImm: true, route: r.Route, dst: r.Dst}
	return e.enqueue(w, &q)
}

// SubmitBarrier posts one immediate-only write to each destination through
// the main worker.
func (e *Engine) SubmitBarrier(r Barrier, c Completion) error {
	if e == nil {
		return errNilEngine
	}
	w := e.main()
	if len(r.Dsts) == 0 {
		return reqErr("barrier", ErrInvalidArgument, "no destinations")
	}
	if err := checkRoute("barrier", r.Route, len(w.doms)); err != nil {
		return err
	}
	for i := range r.Dsts {
		if err := checkDesc("barrier", &r.Dsts[i], len(w.doms)); err != nil {
			return err
		}
	}
	q := request{kind: reqBarrier, c: c, imm: r.Imm, hasImm: true, route: r.Route, dsts: r.Dsts}
	return e.enqueue(w, &q)
}

// SubmitSingle posts a single write through the worker of the source's
// device.
func (e *Engine) SubmitSingle(r SingleWrite, c Completion) error {
	if e == nil {
		return errNilEngine
	}
	const op = "single write"
	if !r.Src.validFor(e) {
		return e.srcErr(op)
	}
	w := r.Src.w
	if err := checkDesc(op, &r.Dst, len(w.doms)); err != nil {
		return err
	}
	if err := checkSingleRoute(op, r.Route, len(w.doms), len(r.Dst.NICs)); err != nil {
		return err
	}
	if !inRange(r.SrcOffset, r.Length, r.Src.span.Len) {
		return reqErr(op, ErrOutOfBounds, "source [%d, +%d) of %d bytes", r.SrcOffset, r.Length, r.Src.span.Len)
	}
	if !r.Dst.check(r.DstOffset, r.Length) {
		return reqErr(op, ErrOutOfBounds, "destination [%d, +%d) of %d bytes", r.DstOffset, r.Length, r.Dst.Length)
	}
	q := request{kind: reqSingle, c: c, imm: r.Imm.v, hasImm: r.Imm.set, route: r.Route, src: r.Src,
		srcOff: r.SrcOffset, dstOff: r.DstOffset, length: r.Length, dst: r.Dst}
	if r.Notify != nil {
		return e.submitNotified(op, []Notification{*r.Notify}, w, &q)
	}
	return e.enqueue(w, &q)
}

// SubmitPaged posts a paged write through the worker of the source's
// device. Every page is bounds-checked against both regions first.
func (e *Engine) SubmitPaged(r PagedWrite, c Completion) error {
	if e == nil {
		return errNilEngine
	}
	const op = "paged write"
	if !r.Src.validFor(e) {
		return e.srcErr(op)
	}
	w := r.Src.w
	if len(r.SrcPages) != len(r.DstPages) {
		return reqErr(op, ErrInvalidArgument, "%d source pages but %d destination pages", len(r.SrcPages), len(r.DstPages))
	}
	if len(r.SrcPages) == 0 {
		return reqErr(op, ErrInvalidArgument, "no pages")
	}
	if err := checkDesc(op, &r.Dst, len(w.doms)); err != nil {
		return err
	}
	slen, dlen := r.Src.span.Len, r.Dst.Length
	for i, p := range r.SrcPages {
		if !pageInRange(r.SrcOffset, r.SrcStride, p, r.Length, slen) {
			return reqErr(op, ErrOutOfBounds, "source page %d (index %d, stride %d, offset %d, %d bytes) outside %d bytes",
				i, p, r.SrcStride, r.SrcOffset, r.Length, slen)
		}
		if !pageInRange(r.DstOffset, r.DstStride, r.DstPages[i], r.Length, dlen) {
			return reqErr(op, ErrOutOfBounds, "destination page %d (index %d, stride %d, offset %d, %d bytes) outside %d bytes",
				i, r.DstPages[i], r.DstStride, r.DstOffset, r.Length, dlen)
		}
	}
	q := request{kind: reqPaged, c: c, imm: r.Imm.v, hasImm: r.Imm.set, src: r.Src,
		srcPages: r.SrcPages, dstPages: r.DstPages, srcStride: r.SrcStride, dstStride: r.DstStride,
		srcOff: r.SrcOffset, dstOff: r.DstOffset, length: r.Length, dst: r.Dst}
	if r.Notify != nil {
		return e.submitNotified(op, []Notification{*r.Notify}, w, &q)
	}
	return e.enqueue(w, &q)
}

// SubmitScatter posts a scatter through the worker of the source's device.
func (e *Engine) SubmitScatter(r ScatterWrite, c Completion) error {
	if e == nil {
		return errNilEngine
	}
	const op = "scatter"
	if !r.Src.validFor(e) {
		return e.srcErr(op)
	}
	w := r.Src.w
	n := len(w.doms)
	if len(r.Targets) == 0 {
		return reqErr(op, ErrInvalidArgument, "no targets")
	}
	if r.Route.mode == 2 && (r.Route.nic < 0 || r.Route.nic >= n) {
		return reqErr(op, ErrInvalidArgument, "pinned nic %d of %d", r.Route.nic, n)
	}
	for i := range r.Targets {
		t := &r.Targets[i]
		if err := checkDesc(op, &t.Dst, n); err != nil {
			return err
		}
		if !inRange(t.SrcOffset, t.Length, r.Src.span.Len) {
			return reqErr(op, ErrOutOfBounds, "target %d source [%d, +%d) of %d bytes", i, t.SrcOffset, t.Length, r.Src.span.Len)
		}
		if !t.Dst.check(t.DstOffset, t.Length) {
			return reqErr(op, ErrOutOfBounds, "target %d destination [%d, +%d) of %d bytes", i, t.DstOffset, t.Length, t.Dst.Length)
		}
	}
	q := request{kind: reqScatter, c: c, imm: r.Imm.v, hasImm: r.Imm.set, src: r.Src,
		targets: r.Targets, sroute: r.Route, group: r.Group}
	if len(r.Notify) > 0 {
		return e.submitNotified(op, r.Notify, w, &q)
	}
	return e.enqueue(w, &q)
}

// srcErr explains a source region a submit cannot use: after Close every
// region is gone, and the caller should hear that the engine is closed.
func (e *Engine) srcErr(op string) error {
	if e.life.closed.Load() {
		return ErrClosed
	}
	return reqErr(op, ErrUnknownRegion, "source")
}

func inRange(off, n, size uint64) bool { return off <= size && n <= size-off }

// pageInRange checks [off+stride*idx, +n) against size without wrapping.
func pageInRange(off, stride uint64, idx uint32, n, size uint64) bool {
	hi, lo := bits.Mul64(stride, uint64(idx))
	if hi != 0 {
		return false
	}
	start, carry := bits.Add64(lo, off, 0)
	return carry == 0 && inRange(start, n, size)
}

// checkSingleRoute checks a single write's route: a pinned NIC is one of
// the writer's, and a sharded write may take up to one shard per NIC of the
// wider of the writer's and the target's groups.
func checkSingleRoute(op string, r Routing, nics, targetNICs int) error {
	if _, pinned := r.IsPinned(); pinned {
		return checkRoute(op, r, nics)
	}
	return checkRoute(op, r, lanes(nics, targetNICs))
}

func checkRoute(op string, r Routing, nics int) error {
	if d, pinned := r.IsPinned(); pinned {
		if d < 0 || d >= nics {
			return reqErr(op, ErrInvalidArgument, "pinned nic %d of %d", d, nics)
		}
		return nil
	}
	if r.n < 0 || r.n > nics {
		return reqErr(op, ErrInvalidArgument, "%d shards for %d nics", r.n, nics)
	}
	return nil
}

// checkDesc refuses descriptors no registration could have produced: what
// the binary form's decoder refuses (no NICs, more than MaxNICs, an address
// mode other than virtual or offset, an empty address) and ranges that
// wrap. Keys cannot be checked here (see Descriptor). The descriptor's NIC
// count need not equal the local group's nics: writes are striped over the
// target's NICs (nicgroups.go).
func checkDesc(op string, d *Descriptor, nics int) error {
	if len(d.NICs) == 0 {
		return reqErr(op, ErrInvalidArgument, "empty destination descriptor")
	}
	if len(d.NICs) > MaxNICs {
		return reqErr(op, ErrNICMismatch, "descriptor has %d nics, at most %d (the local group %d)", len(d.NICs), MaxNICs, nics)
	}
	for i := range d.NICs {
		k := &d.NICs[i]
		if k.Mode != AddrVirtual && k.Mode != AddrOffset {
			return reqErr(op, ErrInvalidArgument, "descriptor nic %d: address mode %d", i, k.Mode)
		}
		if k.Addr.IsZero() {
			return reqErr(op, ErrInvalidArgument, "descriptor nic %d: empty address", i)
		}
	}
	if d.Base+d.Length < d.Base {
		return reqErr(op, ErrInvalidArgument, "descriptor [%#x, +%d) wraps", d.Base, d.Length)
	}
	return nil
}
