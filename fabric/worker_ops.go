package fabric

import (
	"fmt"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// Op contexts. A transfer becomes one opCtx per NIC it uses; an opCtx is a
// lazily expanded sequence of WriteOps on one domain (a shard, a page
// range, a block of scatter targets). Contexts and transfer slots live in
// worker-owned slices addressed by index: the provider's op context is
// that index plus a tag, never a pointer, and steady state allocates
// nothing.

// Op context tags, in the top byte of WriteOp/SendOp/RecvOp.Context. The
// low 24 bits are the op context, transfer or receive slot index. A write
// also carries its op context's generation (bits 24-39), so a completion
// that arrives after its op was abandoned (a lost peer) cannot touch the
// context that reuses the slot, and the op's index within its context
// (bits 40-55, saturated), so an error can be traced to its target.
const (
	ctxTagWrite  = 1 << 56
	ctxTagSend   = 2 << 56
	ctxTagRecv   = 3 << 56
	ctxTagProbe  = 4 << 56 // a heartbeat; the low bits index the domain's peers
	ctxTagMask   = 0xff << 56
	ctxIndexMask = 1<<24 - 1
	ctxGenShift  = 24
	ctxGenMask   = 1<<16 - 1
	ctxOpShift   = 40
	ctxOpMask    = 1<<16 - 1
)

// writeTag is the provider context of op number op of op context ci.
func (c *opCtx) writeTag(ci uint32, op int) uint64 {
	return ctxTagWrite | uint64(min(op, ctxOpMask))<<ctxOpShift | uint64(c.gen)<<ctxGenShift | uint64(ci)
}

type opCtx struct {
	live     bool
	gen      uint32 // generation of this slot, see writeTag
	xfer     uint32
	dom      uint8
	kind     reqKind
	bad      bool
	inQueue  bool
	total    int
	next     int // ops accepted by the provider
	finished int

	src       *MemoryRegion
	localBase uint64
	localDesc uint64
	peer      rdma.PeerID
	ps        *peerState // the one peer of an imm, single or paged context
	psLosses  uint32     // ps.losses when the context was taken
	rkey      uint64
	rbase     uint64
	imm       uint32
	flags     uint32

	srcOff, dstOff, length uint64

	srcPages, dstPages   []uint32
	srcStride, dstStride uint64

	targets []ScatterTarget
	dsts    []Descriptor
	pp      int // pieces per write of a split context (split.go), else 0
	slice   int // byte slice index (ShardBytes)
	nslices int
	group   *peerGroupState
	first   int // index of targets[0] in the group
}

// xferSlot is one transfer: the contexts it is waiting for and its first
// error. A transfer that passed its deadline is reported at once but keeps
// its slot (reported) until the operations the provider holds have
// completed: that is the fence that keeps a late completion from touching
// a newer transfer.
type xferSlot struct {
	live       bool
	reported   bool
	kind       reqKind
	read       bool // a read (rdma.WriteRead): errors name it so
	c          Completion
	pending    int
	err        error
	sendSlot   int32
	deadline   int64      // nanotime; noDeadline for none
	start      int64      // nanotime when accepted
	bytes      uint64     // what the request writes or sends (histogram.go)
	peer       *peerState // a send's peer
	peerLosses uint32     // peer.losses when the send was taken
}

// name is what errors call the transfer.
func (x *xferSlot) name() string {
	if x.read {
		return x.kind.name(rdma.WriteRead)
	}
	return x.kind.String()
}

// enqueueCtx puts a prepared context on its domain's FIFO.
func (w *worker) enqueueCtx(ci uint32) {
	c := &w.pool.ctxs[ci]
	if c.src != nil {
		c.src.inflight++
	}
	if c.total == 0 {
		w.maybeRetire(ci)
		return
	}
	c.inQueue = true
	w.doms[c.dom].fifo.push(ci)
}

// failXfer records the transfer's first error.
func (w *worker) failXfer(xi uint32, err error) {
	x := &w.pool.xfers[xi]
	if x.err == nil {
		x.err = err
	}
}

// maybeRetire frees a context once it is off the FIFO and every op it
// posted has completed; the transfer ends with its last context.
func (w *worker) maybeRetire(ci uint32) {
	c := &w.pool.ctxs[ci]
	if c.inQueue || c.finished < c.next {
		return
	}
	if c.next < c.total && !c.bad && w.pool.xfers[c.xfer].err == nil {
		return
	}
	xi := c.xfer
	if c.src != nil {
		c.src.inflight--
		if c.src.inflight == 0 && c.src.unregWait != nil {
			f := c.src.unregWait
			c.src.unregWait = nil
			f()
		}
	}
	*c = opCtx{}
	w.pool.freeCtx = append(w.pool.freeCtx, ci)
	x := &w.pool.xfers[xi]
	x.pending--
	if x.pending == 0 {
		w.completeXfer(xi)
	}
}

// completeXfer reports a transfer's end, unless that was done already
// (report), and frees its slot.
func (w *worker) completeXfer(xi uint32) {
	x := &w.pool.xfers[xi]
	if !x.live {
		return
	}
	if !x.reported {
		w.report(x)
	}
	if x.sendSlot >= 0 {
		w.e.releaseSendSlot(x.sendSlot)
	}
	*x = xferSlot{}
	w.pool.freeXfer = append(w.pool.freeXfer, xi)
	w.queue.inflight--
}

// report delivers a transfer's end exactly once: its error, or nil.
func (w *worker) report(x *xferSlot) {
	c, err := x.c, x.err
	x.reported = true
	if err == nil {
		w.hist.observe(x.kind, w.now-x.start, x.bytes)
	}
	x.c = Completion{}
	w.queue.unreported--
	if c.ctx != nil {
		w.deadlines.ctxWatched--
	}
	if w.exitState.Load() == workerAbandoned && w.watchdog.callStart.Load() != callClaimed {
		// Close gave up on this worker: nobody is told any more. (With
		// the state claimed, it is the watchdog that reports, failing a
		// gone peer's transfers: those are still told.)
		return
	}
	w.deliver(c, err)
}

// finishXfer ends a transfer that has no contexts (sends).
func (w *worker) finishXfer(xi uint32, err error) {
	w.failXfer(xi, err)
	w.completeXfer(xi)
}

// refuse fails a request the worker cannot start.
func (w *worker) refuse(r *request, err error) {
	xi := w.newXfer(r.kind, r.c)
	if r.kind == reqSend {
		w.pool.xfers[xi].sendSlot = r.slot
	}
	w.finishXfer(xi, err)
}

// target fills the remote half of c for NIC nic of dst (the target's NIC
// index, which need not be c's local one: see remoteNIC).
func (w *worker) target(c *opCtx, dst *Descriptor, nic int) error {
	ds := w.doms[c.dom]
	rk := &dst.NICs[nic]
	p, err := ds.resolve(rk.Addr)
	if err != nil {
		return fmt.Errorf("resolve peer %s on nic %d: %w", rk.Addr, nic, err)
	}
	c.peer, c.ps, c.psLosses, c.rkey = p.id, p, p.losses, rk.Key
	if err := w.usable(p); err != nil {
		return err
	}
	if len(w.peerHealth.goneRegions) > 0 && c.kind != reqImm {
		if err := w.checkRegion(c.kind.name(c.flags), p, rk.Key); err != nil {
			return err
		}
	}
	if p.local {
		if err := w.checkLocal(ds, p, c.kind.name(c.flags), rk, dst); err != nil {
			return err
		}
	}
	c.rbase = 0
	if rk.Mode != AddrOffset {
		c.rbase = dst.Base
	}
	return nil
}

// immSource points an immediate-only context at the main worker's small
// registered buffer (not counted as a user of it: it lives as long as the
// worker).
func (w *worker) immSource(c *opCtx) {
	if r := w.immSrc; r != nil {
		c.localBase = uint64(r.span.Addr)
		c.localDesc = r.keys[c.dom].Local
	}
}

func (w *worker) source(c *opCtx, src *MemoryRegion) {
	c.src = src
	c.localBase = uint64(src.span.Addr)
	c.localDesc = src.keys[c.dom].Local
}

// nextNIC returns the next NIC round-robin.
func (w *worker) nextNIC() int {
	d := w.rr
	w.rr = (w.rr + 1) % len(w.doms)
	return d
}

// accept turns a request into op contexts on the worker's FIFOs.
func (w *worker) accept(r *request) {
	if r.src != nil && !r.src.usableFor(w.e) {
		w.refuse(r, reqErr(r.kind.name(r.flags), ErrUnknownRegion, "source region was unregistered"))
		return
	}
	switch r.kind {
	case reqSend:
		w.acceptSend(r)
		return
	case reqRecv:
		w.postRecvSlot(int(r.slot))
		return
	}
	xi := w.newXfer(r.kind, r.c)
	w.pool.xfers[xi].bytes = payload(r)
	if r.flags&rdma.WriteRead != 0 {
		w.pool.xfers[xi].read = true
	}
	n := len(w.doms)
	fail := func(ci uint32, err error) {
		w.failXfer(xi, err)
		w.pool.ctxs[ci].bad = true
		w.pool.ctxs[ci].total = 0
	}
	imm := func(c *opCtx) {
		c.imm = r.imm
		if r.hasImm {
			c.flags = rdma.WriteHasImm
		}
		c.flags |= r.flags
	}
	switch r.kind {
	case reqImm:
		d, pinned := r.route.IsPinned()
		if !pinned {
			d = w.nextNIC()
		}
		ci := w.pool.newCtx(xi, d, reqImm)
		c := &w.pool.ctxs[ci]
		c.total, c.imm, c.flags = 1, r.imm, rdma.WriteHasImm
		w.immSource(c)
		if err := w.target(c, &r.dst, remoteNIC(d, d, n, len(r.dst.NICs))); err != nil {
			fail(ci, err)
		}
		w.enqueueCtx(ci)
	case reqBarrier:
		if d, pinned := r.route.IsPinned(); pinned {
			w.barrierBlock(xi, d, r.dsts, 0, r.imm)
			break
		}
		for b := 0; b < blockCount(len(r.dsts), n); b++ {
			lo, hi := blockRange(len(r.dsts), n, b)
			w.barrierBlock(xi, w.nextNIC(), r.dsts[lo:hi], lo, r.imm)
		}
	case reqSingle:
		shards := 1
		d, pinned := r.route.IsPinned()
		if !pinned {
			shards = r.route.n
			if shards == 0 {
				shards = lanes(n, len(r.dst.NICs))
			}
		}
		for k := 0; k < shards; k++ {
			if !pinned {
				d = w.nextNIC()
			}
			ci := w.pool.newCtx(xi, d, reqSingle)
			c := &w.pool.ctxs[ci]
			c.total = 1
			imm(c)
			w.source(c, r.src)
			off, size := shardRange(r.length, shards, k)
			if size == 0 {
				c.srcOff, c.dstOff, c.length = 0, 0, 0
			} else {
				c.srcOff, c.dstOff, c.length = r.srcOff+off, r.dstOff+off, size
			}
			w.splitUnits(c, 1, c.length)
			if err := w.target(c, &r.dst, remoteNIC(d, k, n, len(r.dst.NICs))); err != nil {
				fail(ci, err)
			}
			w.enqueueCtx(ci)
		}
	case reqPaged:
		p, m := len(r.srcPages), len(r.dst.NICs)
		for b := 0; b < blockCount(p, lanes(n, m)); b++ {
			lo, hi := blockRange(p, lanes(n, m), b)
			d := w.nextNIC()
			ci := w.pool.newCtx(xi, d, reqPaged)
			c := &w.pool.ctxs[ci]
			c.total = hi - lo
			imm(c)
			w.source(c, r.src)
			c.srcPages, c.dstPages = r.srcPages[lo:hi], r.dstPages[lo:hi]
			c.srcStride, c.dstStride = r.srcStride, r.dstStride
			c.srcOff, c.dstOff, c.length = r.srcOff, r.dstOff, r.length
			w.splitUnits(c, hi-lo, r.length)
			if err := w.target(c, &r.dst, remoteNIC(d, b, n, m)); err != nil {
				fail(ci, err)
			}
			w.enqueueCtx(ci)
		}
	case reqScatter:
		w.acceptScatter(xi, r)
	}
	if w.pool.xfers[xi].pending == 0 {
		w.completeXfer(xi)
	}
}

// barrierBlock queues the destinations dsts (the barrier's from index
// first on) on NIC d.
func (w *worker) barrierBlock(xi uint32, d int, dsts []Descriptor, first int, immv uint32) {
	ci := w.pool.newCtx(xi, d, reqBarrier)
	c := &w.pool.ctxs[ci]
	c.total, c.imm, c.flags, c.dsts, c.first = len(dsts), immv, rdma.WriteHasImm, dsts, first
	w.immSource(c)
	w.enqueueCtx(ci)
}

func (w *worker) acceptScatter(xi uint32, r *request) {
	n := len(w.doms)
	var g *peerGroupState
	if r.group.id != 0 {
		g = w.groups[r.group.id]
		if g == nil {
			w.failXfer(xi, reqErr("scatter", ErrInvalidArgument, "unknown peer group %d", r.group.id))
			return
		}
		if len(g.peers) != len(r.targets) {
			w.failXfer(xi, reqErr("scatter", ErrInvalidArgument, "%d targets for a group of %d peers", len(r.targets), len(g.peers)))
			return
		}
	}
	mk := func(d int, lo, hi, slice, nslices int) {
		ci := w.pool.newCtx(xi, d, reqScatter)
		c := &w.pool.ctxs[ci]
		c.total = hi - lo
		c.imm = r.imm
		if r.hasImm {
			c.flags = rdma.WriteHasImm
		}
		c.flags |= r.flags
		w.source(c, r.src)
		c.targets, c.first, c.group = r.targets[lo:hi], lo, g
		c.slice, c.nslices = slice, nslices
		w.splitScatter(c)
		w.enqueueCtx(ci)
	}
	t := len(r.targets)
	switch r.sroute.mode {
	case 0:
		for b := 0; b < blockCount(t, n); b++ {
			lo, hi := blockRange(t, n, b)
			mk(w.nextNIC(), lo, hi, 0, 1)
		}
	case 1:
		for s := 0; s < n; s++ {
			mk(s, 0, t, s, n)
		}
	case 2:
		mk(r.sroute.nic, 0, t, 0, 1)
	}
}

// fill writes c's next ops (from c.next) into out and returns how many.
// A peer that cannot be resolved marks c bad and stops it.
func (w *worker) fill(c *opCtx, out []rdma.WriteOp) int {
	if c.pp > 1 {
		return w.fillSplit(c, out)
	}
	return w.fillWhole(c, out)
}

// fillWhole is fill for a context whose ops are whole writes.
func (w *worker) fillWhole(c *opCtx, out []rdma.WriteOp) int {
	k := min(c.total-c.next, len(out))
	i0 := c.next
	switch c.kind {
	case reqImm, reqSingle:
		if k > 0 {
			out[0] = rdma.WriteOp{
				Local: c.localBase + c.srcOff, Length: c.length, LocalDesc: c.localDesc,
				Remote: c.rbase + c.dstOff, RemoteKey: c.rkey, Peer: c.peer,
				Imm: c.imm, Flags: c.flags,
			}
		}
	case reqPaged:
		sp, dp := c.srcPages[i0:i0+k], c.dstPages[i0:i0+k]
		local := c.localBase + c.srcOff
		remote := c.rbase + c.dstOff
		for j := range sp {
			out[j] = rdma.WriteOp{
				Local: local + c.srcStride*uint64(sp[j]), Length: c.length, LocalDesc: c.localDesc,
				Remote: remote + c.dstStride*uint64(dp[j]), RemoteKey: c.rkey, Peer: c.peer,
				Imm: c.imm, Flags: c.flags,
			}
		}
	case reqBarrier:
		ds, n := w.doms[c.dom], len(w.doms)
		for j := 0; j < k; j++ {
			dst := &c.dsts[i0+j]
			rk := c.barrierKey(i0+j, n)
			p, err := ds.resolve(rk.Addr)
			if err != nil {
				err = fmt.Errorf("barrier: resolve peer %s: %w", rk.Addr, err)
			} else if err = w.usable(p); err == nil && p.local {
				err = w.checkLocal(ds, p, "barrier", rk, dst)
			}
			if err != nil {
				w.failXfer(c.xfer, err)
				c.bad = true
				return j
			}
			rb := dst.Base
			if rk.Mode == AddrOffset {
				rb = 0
			}
			out[j] = rdma.WriteOp{Local: c.localBase, Remote: rb, RemoteKey: rk.Key, Peer: p.id, Imm: c.imm, Flags: c.flags}
		}
	case reqScatter:
		ds, n := w.doms[c.dom], len(w.doms)
		for j := 0; j < k; j++ {
			t := &c.targets[i0+j]
			rk := c.scatterKey(i0+j, n)
			var p *peerState
			var err error
			if c.group != nil {
				p = c.group.peers[c.first+i0+j][c.dom]
			} else if p, err = ds.resolve(rk.Addr); err != nil {
				err = fmt.Errorf("scatter: resolve peer %s: %w", rk.Addr, err)
			}
			if err == nil {
				err = w.usable(p)
			}
			if err == nil && len(w.peerHealth.goneRegions) > 0 {
				err = w.checkRegion("scatter", p, rk.Key)
			}
			if err == nil && p.local {
				err = w.checkLocal(ds, p, "scatter", rk, &t.Dst)
			}
			if err != nil {
				w.failXfer(c.xfer, err)
				c.bad = true
				return j
			}
			rb := t.Dst.Base
			if rk.Mode == AddrOffset {
				rb = 0
			}
			off, size := uint64(0), t.Length
			if c.nslices > 1 {
				off, size = byteSlice(t.Length, c.nslices, c.slice)
			}
			op := rdma.WriteOp{LocalDesc: c.localDesc, RemoteKey: rk.Key, Peer: p.id, Imm: c.imm, Flags: c.flags}
			if size > 0 {
				op.Local = c.localBase + t.SrcOffset + off
				op.Remote = rb + t.DstOffset + off
				op.Length = size
			} else {
				op.Local, op.Remote = c.localBase, rb
			}
			out[j] = op
		}
	}
	return k
}

// deliver tells c that its transfer ended with err.
func (w *worker) deliver(c Completion, err error) {
	if err != nil {
		w.e.failures.Add(1)
	} else {
		w.completed++ // added to Stats.Completed by publishCounts
	}
	c.finishDirect(err)
	if c.needsDispatch() {
		w.pending = append(w.pending, dispEvent{kind: dispXfer, fn: c.fn, err: err})
	} else if err != nil && c.t == nil && c.counter == nil {
		w.e.log.Warn("ferry transfer failed with no completion to report to", "err", err)
	}
}
