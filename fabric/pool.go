package fabric

// The worker's op contexts and transfer slots are pooled: taken and given
// back by index, reused without allocation. Only the worker touches them.

// opPool holds a worker's op contexts and transfer slots.
type opPool struct {
	ctxs     []opCtx
	freeCtx  []uint32
	xfers    []xferSlot
	freeXfer []uint32
	ctxGen   uint32
}

func (w *worker) newXfer(kind reqKind, c Completion) uint32 {
	var i uint32
	if n := len(w.pool.freeXfer); n > 0 {
		i = w.pool.freeXfer[n-1]
		w.pool.freeXfer = w.pool.freeXfer[:n-1]
	} else {
		w.pool.xfers = append(w.pool.xfers, xferSlot{})
		i = uint32(len(w.pool.xfers) - 1)
	}
	// A free slot is all zero (completeXfer clears it, append makes it):
	// only the fields that are not zero are written, not the whole slot.
	x := &w.pool.xfers[i]
	x.live, x.kind, x.c, x.sendSlot, x.start, x.deadline = true, kind, c, -1, w.now, c.deadline
	w.queue.inflight++
	w.queue.unreported++
	w.watchDeadline(x)
	return i
}

// newCtx takes an op context for transfer slot xi on domain dom.
func (p *opPool) newCtx(xi uint32, dom int, kind reqKind) uint32 {
	var i uint32
	if n := len(p.freeCtx); n > 0 {
		i = p.freeCtx[n-1]
		p.freeCtx = p.freeCtx[:n-1]
	} else {
		p.ctxs = append(p.ctxs, opCtx{})
		i = uint32(len(p.ctxs) - 1)
	}
	p.ctxGen++
	// As in newXfer: a free context is all zero (maybeRetire clears it),
	// so only its identity is written; a composite literal would copy the
	// whole context (over 200 bytes) per op context.
	c := &p.ctxs[i]
	c.live, c.gen, c.xfer, c.dom, c.kind = true, p.ctxGen&ctxGenMask, xi, uint8(dom), kind
	p.xfers[xi].pending++
	return i
}
