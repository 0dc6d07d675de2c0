package fabric

import (
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// progress posts queued work and reaps completions on every domain. It
// reports whether anything happened.
func (w *worker) progress() bool {
	did := false
	for _, ds := range w.doms {
		if w.postWrites(ds) {
			did = true
		}
		if len(ds.sendQ) > 0 && w.postSends(ds) {
			did = true
		}
		if len(ds.recvQ) > 0 && w.postRecvs(ds) {
			did = true
		}
	}
	if w.poll() {
		did = true
	}
	return did
}

// postWrites fills batches from the FIFO, head first, and posts each in one
// call until the provider is busy or the queue depth is reached. Ops are
// posted in FIFO order; a context leaves the FIFO once all its ops are
// accepted.
func (w *worker) postWrites(ds *domState) bool {
	did := false
	for !ds.fifo.empty() {
		room := min(len(ds.batch), ds.depth-ds.posted)
		if room <= 0 {
			return did
		}
		nb := 0
		var bytes uint64 // of the nb ops filled
		ds.segs = ds.segs[:0]
		for qi := 0; qi < ds.fifo.size && nb < room; qi++ {
			ci := ds.fifo.at(qi)
			c := &w.pool.ctxs[ci]
			if c.bad || w.pool.xfers[c.xfer].err != nil {
				if qi == 0 {
					ds.fifo.pop()
					c.inQueue = false
					c.bad = true
					w.maybeRetire(ci)
					qi--
					did = true
				}
				continue
			}
			i0 := c.next
			k := w.fill(c, ds.batch[nb:room])
			// writeTag's bits but the op index, once per context: a
			// refused batch is filled again on the next pass, so this
			// loop runs several times per op on a busy provider.
			tag := c.writeTag(ci, 0)
			ops := ds.batch[nb : nb+k]
			if i0+k <= ctxOpMask {
				t := tag | uint64(i0)<<ctxOpShift
				for j := range ops {
					ops[j].Context = t
					t += 1 << ctxOpShift
					bytes += ops[j].Length
				}
			} else {
				for j := range ops {
					ops[j].Context = tag | uint64(min(i0+j, ctxOpMask))<<ctxOpShift
					bytes += ops[j].Length
				}
			}
			if k > 0 {
				ds.segs = append(ds.segs, batchSeg{ctx: ci, n: k})
			}
			nb += k
			if c.bad || c.next+k < c.total {
				break
			}
		}
		if nb == 0 {
			return did
		}
		call := w.beginCall()
		n, err := ds.d.PostWrites(ds.batch[:nb])
		w.endCall(call)
		if n > 0 {
			did = true
			ds.posted += n
			ds.stats.Posted.Add(uint64(n))
			ds.stats.InFlight.Add(int64(n))
			if n < nb {
				// Part of the batch was taken: count only that part.
				bytes = 0
				for j := 0; j < n; j++ {
					bytes += ds.batch[j].Length
				}
			}
			ds.stats.Bytes.Add(bytes)
		}
		// Advance the contexts by what was accepted, in order.
		var refusedBy *peerState
		rem := n
		for _, s := range ds.segs {
			c := &w.pool.ctxs[s.ctx]
			a := min(s.n, rem)
			c.next += a
			rem -= a
			if a < s.n {
				if err != nil && rem == 0 {
					// ops[n] was refused for good: the context fails and
					// posts nothing more.
					refusedBy = ds.byID[ds.batch[n].Peer]
					ferr := fmt.Errorf("post write on %s: %w", ds.info.Name, err)
					if refusedBy != nil && errors.Is(err, ErrPeerLost) {
						// Named as a failed completion would be (writeDone).
						ferr = &PeerError{Peer: refusedBy.addr, Cause: ferr}
					}
					w.failXfer(c.xfer, ferr)
					c.bad = true
					ds.stats.Errors.Add(1)
				}
				break
			}
		}
		// The peer that refused is declared lost before the failure is
		// reported (the pops below may do that).
		if refusedBy != nil {
			w.noteOpError(ds, refusedBy, err)
		}
		// Pop contexts that are fully posted or dead from the head.
		for !ds.fifo.empty() {
			ci := ds.fifo.at(0)
			c := &w.pool.ctxs[ci]
			if c.next < c.total && !c.bad && w.pool.xfers[c.xfer].err == nil {
				break
			}
			ds.fifo.pop()
			c.inQueue = false
			w.maybeRetire(ci)
		}
		if n < nb && err == nil {
			return did // provider busy: poll, then come back
		}
	}
	return did
}

// busyPollNanos is how long an empty poll must take to count as progress
// work: an idle completion queue answers in well under a microsecond.
const busyPollNanos = 3000

// poll reaps every domain's completion queue once.
func (w *worker) poll() bool {
	did := false
	timed := w.e.cfg.Poll == PollAdaptive
	for _, ds := range w.doms {
	again:
		var t0 int64
		if timed {
			t0 = nanotime()
		}
		call := w.beginCall()
		n, err := ds.d.Poll(ds.events)
		w.endCall(call)
		if err != nil {
			w.domainFailed(ds, err)
			continue
		}
		if n == 0 {
			// A passive target gets no completion for plain writes, yet
			// on manual-progress providers its polls are what move their
			// bytes. A poll much slower than this domain's idle polls
			// probably did such work: the worker then keeps its sleeps at
			// the shortest (a slow poll can also be a cold cache after a
			// sleep, so it does not restart spinning). Idle polls cost
			// differently per provider: tcp's run epoll, shm's scan memory.
			if timed {
				d := nanotime() - t0
				if d > busyPollNanos && d > 4*ds.idlePoll {
					w.sleep.busyPoll = true
				} else {
					ds.idlePoll += (d - ds.idlePoll) / 8
				}
			}
			continue
		}
		did = true
		ds.stats.Completions.Add(uint64(n))
		for i := 0; i < n; i++ {
			ev := &ds.events[i]
			kind := ev.Kind
			if ev.Errno != 0 && kind != rdma.EventImm {
				// Error completions may not say what the op was; the
				// context tag always does.
				kind = tagKind(ev.Context)
			}
			switch kind {
			case rdma.EventImm:
				if ev.Errno != 0 {
					ds.stats.Errors.Add(1)
					w.e.log.Warn("ferry incoming write failed", "nic", ds.info.Name, "err", ds.d.DescribeError(*ev))
					continue
				}
				ds.stats.Imms.Add(1)
				w.immArrived(ev.Imm)
			case rdma.EventWrite:
				w.writeDone(ds, ev)
			case rdma.EventSend:
				w.sendDone(ds, ev)
			case rdma.EventRecv:
				w.recvDone(ds, ev)
			default:
				w.unmatched(ds, ev)
			}
		}
		if ds.reaped > 0 {
			// One atomic add per poll, not per completion.
			ds.stats.InFlight.Add(-ds.reaped)
			ds.reaped = 0
		}
		if n == len(ds.events) && ds.posted > 0 {
			// A full batch: more are likely waiting; reap them before
			// posting again so the queue depth frees up.
			goto again
		}
	}
	return did
}

// tagKind recovers an op's kind from the tag the engine put in its context.
// A heartbeat is a write: its error completion goes to probeDone, which
// blames the peer, not to unmatched.
func tagKind(ctx uint64) rdma.EventKind {
	switch ctx & ctxTagMask {
	case ctxTagWrite, ctxTagProbe:
		return rdma.EventWrite
	case ctxTagSend:
		return rdma.EventSend
	case ctxTagRecv:
		return rdma.EventRecv
	}
	return 0
}

func (w *worker) writeDone(ds *domState, ev *rdma.Event) {
	ci := uint32(ev.Context & ctxIndexMask)
	if ev.Context&ctxTagMask != ctxTagWrite || int(ci) >= len(w.pool.ctxs) {
		if ev.Context&ctxTagMask == ctxTagProbe {
			w.probeDone(ds, ev)
			return
		}
		w.unmatched(ds, ev)
		return
	}
	c := &w.pool.ctxs[ci]
	if !c.live || uint64(c.gen) != ev.Context>>ctxGenShift&ctxGenMask || c.finished >= c.next {
		// The op was abandoned (its peer is gone for good) and its slot
		// may have been reused since, or the context still waits to leave
		// its queue: it was already accounted for.
		w.e.late.Add(1)
		if ev.Errno != 0 {
			ds.stats.Errors.Add(1)
		}
		return
	}
	ds.posted--
	ds.reaped++ // poll takes them off stats.InFlight, once per poll
	c.finished++
	if ev.Errno != 0 {
		// Whoever hears of the failure sees the gauge settled.
		ds.stats.InFlight.Add(-ds.reaped)
		ds.reaped = 0
		ds.stats.Errors.Add(1)
		c.bad = true
		err := ds.d.DescribeError(*ev)
		ps := w.opPeer(ds, c, int(ev.Context>>ctxOpShift&ctxOpMask))
		if ps != nil && errors.Is(err, ErrPeerLost) {
			// The transfer fails as every other one to that peer does:
			// with the PeerError naming it, not the provider's error
			// alone (it is the cause).
			err = &PeerError{Peer: ps.addr, Cause: err}
		}
		if ps != nil && errors.Is(err, ErrUnknownRegion) {
			w.regionGone(ps, c, int(ev.Context>>ctxOpShift&ctxOpMask))
		}
		if stale := w.staleCause(ds, ps, err); stale != nil {
			err = stale
		}
		w.failXfer(c.xfer, err)
		// The peer is declared lost before the transfer's failure is
		// reported (which that may do already).
		w.noteOpError(ds, ps, err)
		if w.pool.ctxs[ci].live {
			w.maybeRetire(ci)
		}
		return
	}
	if ps := c.ps; ps != nil {
		ps.answered = w.now
		if answeredSince(ps, c.psLosses) {
			w.peerBack(ds, ps)
		}
	}
	// Most completions of a paged or scatter context leave it waiting
	// for more: maybeRetire's first test, inline.
	if !c.inQueue && c.finished >= c.next {
		w.maybeRetire(ci)
	}
}

// immArrived counts one incoming immediate. The counter map is read for
// each immediate (one atomic load). A miss with OnImm callbacks installed
// is settled without a lock (immMissedFast); one without is kept for
// flush, which settles the pass's misses under one lock (settleMissed):
// the lock and the map of held immediates are paid per pass, not per
// immediate.
func (w *worker) immArrived(imm uint32) {
	ent := (*w.e.imms.counters.Load())[imm]
	reached, counted := false, false
	if ent != nil {
		reached, counted = ent.arrive()
	}
	if !counted {
		var toCallbacks, settled bool
		ent, reached, toCallbacks, settled = w.e.immMissedFast(imm)
		if !settled {
			if n := len(w.missed); n > 0 && w.missed[n-1].imm == imm {
				w.missed[n-1].n++
			} else {
				w.missed = append(w.missed, immRun{imm: imm, n: 1})
			}
			return
		}
		if toCallbacks {
			w.pending = append(w.pending, dispEvent{kind: dispImm, imm: imm})
			return
		}
	}
	if reached {
		w.pending = append(w.pending, dispEvent{kind: dispImmReached, ent: ent})
	}
}

// immRun is n immediates of one value in a row.
type immRun struct {
	imm uint32
	n   int64
}

// settleMissed settles the immediates of this pass that no counter took,
// under one hold of the engine's immediate lock (see immMissedFast).
func (w *worker) settleMissed() {
	e := w.e
	e.imms.mu.Lock()
	for _, m := range w.missed {
		ent, reached, toCallbacks := e.immMissedLocked(m.imm, m.n)
		if toCallbacks {
			for range m.n {
				w.pending = append(w.pending, dispEvent{kind: dispImm, imm: m.imm})
			}
		} else if reached {
			w.pending = append(w.pending, dispEvent{kind: dispImmReached, ent: ent})
		}
	}
	e.imms.mu.Unlock()
	w.missed = w.missed[:0]
}

// domainFailed fails everything on a domain whose provider reported a
// fatal error; the domain is not polled again.
func (w *worker) domainFailed(ds *domState, err error) {
	w.e.log.Error("ferry domain failed", "nic", ds.info.Name, "err", err)
	di := indexOf(w.doms, ds)
	for i := range w.pool.ctxs {
		c := &w.pool.ctxs[i]
		if !c.live || int(c.dom) != di {
			continue
		}
		ds.posted -= c.next - c.finished
		ds.stats.InFlight.Add(-int64(c.next - c.finished))
		c.finished = c.next
		c.bad = true
		w.failXfer(c.xfer, err)
	}
	for !ds.fifo.empty() {
		w.pool.ctxs[ds.fifo.pop()].inQueue = false
	}
	for i := range w.pool.ctxs {
		if c := &w.pool.ctxs[i]; c.live && int(c.dom) == di {
			w.maybeRetire(uint32(i))
		}
	}
	for _, s := range ds.sendQ {
		w.finishXfer(uint32(s.Context&ctxIndexMask), err)
	}
	ds.sendQ = ds.sendQ[:0]
	ds.d = &failedDomain{Domain: ds.d, err: err}
}

func indexOf(doms []*domState, ds *domState) int {
	for i, d := range doms {
		if d == ds {
			return i
		}
	}
	return -1
}

// failedDomain refuses every post and reports nothing, after a fatal error.
type failedDomain struct {
	rdma.Domain
	err error
}

func (f *failedDomain) PostWrites(ops []rdma.WriteOp) (int, error) { return 0, f.err }
func (f *failedDomain) PostSends(ops []rdma.SendOp) (int, error)   { return 0, f.err }
func (f *failedDomain) PostRecvs(ops []rdma.RecvOp) (int, error)   { return 0, f.err }
func (f *failedDomain) Poll(ev []rdma.Event) (int, error)          { return 0, nil }
