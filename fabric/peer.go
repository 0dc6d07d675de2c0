package fabric

import (
	"errors"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// Peer liveness. A worker keeps a peerState per peer address and domain.
// A peer is declared lost on evidence: a completion or a refused post the
// provider marks as the peer's (a reset or refused connection, a peer
// that refused every post for the handshake timeout), a PeerChecker
// finding its process gone, or Engine.DeclarePeerLost (evidence from
// outside, such as a directory entry that expired). From then on:
//
//   - queued work to it fails at once with a *PeerError, and transfers
//     with operations to it are reported at once (their posted ops stay
//     fenced until they come back, or are abandoned when the provider says
//     the peer is gone for good and nothing will come back);
//   - new work to it fails fast, except one op per LivenessInterval that is
//     let through as a probe: if it completes, the peer is reachable again
//     (a restarted peer on the same address), unless it is gone for good;
//   - the engine-wide registry (PeerStatus, OnPeerLost, counters bound to
//     the peer with ImmCounter.Watch) learns of it.
//
// Peers the engine watches (WatchPeer) but sends nothing to get a
// heartbeat from providers that have a harmless one (PeerProber), and the
// provider's check (PeerChecker) every LivenessInterval.

// peerState is what a worker knows of one peer address on one of its
// domains. Worker-owned.
type peerState struct {
	addr    Address
	id      rdma.PeerID
	idx     uint32     // in domState.peerList
	lost    *PeerError // nil while reachable
	gone    bool       // lost for good: its process or endpoint ended
	retryAt int64      // nanotime after which one op may try a lost peer
	used    int64      // nanotime of the last op accepted for it
	watched int        // Engine.WatchPeer count
	probing bool       // a heartbeat is with the provider
	probeAt int64      // when it was posted
	// answered is when an op for it last completed: a heartbeat queued
	// behind writes that keep completing is late, not unanswered.
	answered int64
	losses   uint32 // times declared lost: an op taken before the last loss says nothing of now
	local    bool   // an endpoint of this process: descriptors are checked
	localOK  localOK
}

// recentPeer is how long after its last op a peer is still checked.
const recentPeer = int64(10 * time.Second)

// resolve returns the worker's state for addr on domain ds, asking the
// provider for its handle the first time.
func (ds *domState) resolve(addr Address) (*peerState, error) {
	if p, ok := ds.peers[addr]; ok {
		return p, nil
	}
	id, err := ds.d.ResolvePeer(addr)
	if err != nil {
		return nil, err
	}
	p := &peerState{addr: addr, id: id, idx: uint32(len(ds.peerList)), local: isLocalEndpoint(addr)}
	ds.peers[addr] = p
	ds.peerList = append(ds.peerList, p)
	ds.byID[id] = p
	return p, nil
}

// usable returns the error new work to ps fails with, or nil. A lost peer
// that is not gone for good lets one op through per retry interval.
func (w *worker) usable(ps *peerState) error {
	ps.used = w.now
	if ps.lost == nil {
		return nil
	}
	if ps.gone || w.now < ps.retryAt {
		return ps.lost
	}
	ps.retryAt = w.now + w.retryInterval()
	return nil
}

func (w *worker) retryInterval() int64 {
	return int64(max(w.e.cfg.LivenessInterval, 100*time.Millisecond))
}

// peerLost declares ps lost with cause and fails the work queued to it.
// gone means nothing posted to it will ever complete: its posted ops are
// abandoned. A peer gone for good is usually one endpoint of a process
// that ended, whose other endpoints (the other NICs of the same engine)
// ended with it though nothing sent to them failed yet: every peer of the
// worker is then checked at once (sweepGone), and all those found gone are
// declared before any of their transfers is failed, so that whoever learns
// of a failure finds each of them declared.
func (w *worker) peerLost(ds *domState, ps *peerState, cause error, gone bool) {
	if !w.declareLost(ds, ps, cause, gone) {
		return
	}
	if !gone {
		w.failPeerWork(ds, ps, ps.lost)
		return
	}
	found := w.sweepGone()
	w.failPeerWork(ds, ps, ps.lost)
	for _, l := range found {
		w.failPeerWork(l.ds, l.p, l.p.lost)
	}
	clear(found)
	w.swept = found[:0]
}

// declareLost records that ps is lost (gone: for good) and tells the
// engine-wide registry. It reports false when that changed nothing: the
// peer was lost already, and as much for good.
func (w *worker) declareLost(ds *domState, ps *peerState, cause error, gone bool) bool {
	ps.retryAt = w.now + w.retryInterval()
	if ps.lost != nil && (ps.gone || !gone) {
		// Already lost: its queued work failed then, and new work fails
		// fast (the op let through to try it again fails on its own).
		return false
	}
	var pe *PeerError
	if errors.As(cause, &pe) && pe.Peer == ps.addr {
		cause = pe.Cause
	}
	pe = &PeerError{Peer: ps.addr, Cause: cause}
	first := ps.lost == nil
	ps.lost, ps.gone = pe, gone
	if first {
		ps.losses++
		if peerClosed(cause) {
			w.e.log.Debug("ferry peer closed", "nic", ds.info.Name, "peer", ps.addr.String(), "err", cause)
		} else {
			w.e.log.Warn("ferry peer lost", "nic", ds.info.Name, "peer", ps.addr.String(), "gone", gone, "err", cause)
		}
		w.e.peersLost.Add(1)
		if w.e.notePeerLost(pe) {
			w.pending = append(w.pending, dispEvent{kind: dispPeerLost, perr: pe})
		}
	}
	return true
}

// peerClosed reports whether err says the peer closed its endpoint in
// order (ProviderError.PeerClosed, or an endpoint of this process that
// was closed).
func peerClosed(err error) bool {
	var pe *ProviderError
	return errors.Is(err, errLocalClosed) || errors.As(err, &pe) && pe.PeerClosed
}

// sweepGone asks the provider of each domain that can check its peers
// about every peer not yet gone for good, declares those it finds gone,
// and returns them (in w.swept; their work is not failed yet).
func (w *worker) sweepGone() []lostPeer {
	found := w.swept[:0]
	for _, ds := range w.doms {
		pc, ok := ds.d.(rdma.PeerChecker)
		if !ok {
			continue
		}
		for _, ps := range ds.peerList {
			if ps.gone {
				continue
			}
			if err := pc.CheckPeer(ps.id); err != nil && w.declareLost(ds, ps, err, true) {
				found = append(found, lostPeer{ds, ps})
			}
		}
	}
	w.swept = found
	return found
}

// peerBack clears a lost peer that completed an op again. Callers pass
// only ops taken for the peer after it was declared lost (answeredSince):
// an op posted before the loss may complete well after it (its bytes left
// before the peer died) and proves nothing about the peer now.
func (w *worker) peerBack(ds *domState, ps *peerState) {
	if ps.lost == nil || ps.gone {
		return
	}
	ps.lost = nil
	w.e.log.Info("ferry peer reachable again", "nic", ds.info.Name, "peer", ps.addr.String())
	w.e.notePeerBack(ps.addr)
}

// answeredSince reports whether an op taken when ps had been lost losses
// times shows that ps answers now: it was taken after the latest loss.
func answeredSince(ps *peerState, losses uint32) bool {
	return ps != nil && ps.lost != nil && ps.losses == losses
}

// failPeerWork fails every transfer with work on ds for ps.
func (w *worker) failPeerWork(ds *domState, ps *peerState, pe *PeerError) {
	di := indexOf(w.doms, ds)
	for i := range w.ctxs {
		c := &w.ctxs[i]
		if !c.live || int(c.dom) != di || !w.ctxUses(c, ps) {
			continue
		}
		xi := c.xfer
		w.failXfer(xi, pe)
		c.bad = true
		if ps.gone && c.ps == ps {
			// Nothing will come back for these: give their queue depth
			// and their slot back. Late completions are stale by
			// generation.
			n := c.next - c.finished
			ds.posted -= n
			ds.stats.InFlight.Add(-int64(n))
			c.finished = c.next
		}
		w.maybeRetire(uint32(i))
		if x := &w.xfers[xi]; x.live && !x.reported {
			w.report(x)
		}
	}
	for i := 0; i < len(ds.sendQ); {
		if ds.sendQ[i].Peer != ps.id {
			i++
			continue
		}
		xi := uint32(ds.sendQ[i].Context & ctxIndexMask)
		ds.sendQ = append(ds.sendQ[:i], ds.sendQ[i+1:]...)
		w.finishXfer(xi, pe)
	}
	for i := range w.xfers {
		if x := &w.xfers[i]; x.live && !x.reported && x.kind == reqSend && x.peer == ps {
			// Posted: its buffer stays with the provider until it comes
			// back; the sender hears now.
			x.err = pe
			w.report(x)
		}
	}
}

// ctxUses reports whether c has operations for ps.
func (w *worker) ctxUses(c *opCtx, ps *peerState) bool {
	switch {
	case c.ps != nil:
		return c.ps == ps
	case c.kind == reqBarrier:
		for i := range c.dsts {
			if c.dsts[i].NICs[c.dom].Addr == ps.addr {
				return true
			}
		}
	case c.kind == reqScatter:
		for j := range c.targets {
			if c.group != nil {
				if c.group.peers[c.first+j][c.dom] == ps {
					return true
				}
			} else if c.targets[j].Dst.NICs[c.dom].Addr == ps.addr {
				return true
			}
		}
	}
	return false
}

// opPeer returns the peer of op number op of c, if it can tell.
func (w *worker) opPeer(ds *domState, c *opCtx, op int) *peerState {
	if c.ps != nil {
		return c.ps
	}
	if op >= ctxOpMask {
		return nil
	}
	if c.pp > 1 {
		op /= c.pp // the pieces of one write share its target
	}
	var a Address
	switch c.kind {
	case reqBarrier:
		if op >= len(c.dsts) {
			return nil
		}
		a = c.dsts[op].NICs[c.dom].Addr
	case reqScatter:
		if op >= len(c.targets) {
			return nil
		}
		if c.group != nil {
			return c.group.peers[c.first+op][c.dom]
		}
		a = c.targets[op].Dst.NICs[c.dom].Addr
	default:
		return nil
	}
	return ds.peers[a]
}

// noteOpError declares the peer of a failed op lost when the provider
// says the error is the peer's. A provider that can check its peers is
// asked at once whether this one is gone for good (its process ended):
// then no op is let through to it again, and none that completes can
// bring it back. Callers declare the loss before they report the failed
// transfer.
func (w *worker) noteOpError(ds *domState, ps *peerState, err error) {
	if ps == nil || !errors.Is(err, ErrPeerLost) {
		return
	}
	if errors.Is(err, ErrTimeout) {
		ds.stalled = true // it stopped answering: no reset, no refusal
	}
	gone := ps.gone
	if pc, ok := ds.d.(rdma.PeerChecker); ok && !gone {
		if cerr := pc.CheckPeer(ps.id); cerr != nil {
			gone = true
			if errors.Is(cerr, ErrStaleDescriptor) {
				err = cerr // the better cause: later work fails with it
			}
		}
	}
	w.peerLost(ds, ps, err, gone)
}

// staleCause returns, for an op that failed for its peer's fault, the
// provider's finding that the peer's engine is gone for good or replaced
// (a *PeerError whose cause wraps ErrStaleDescriptor), which says more
// than the op's error; nil when there is no such finding.
func (w *worker) staleCause(ds *domState, ps *peerState, err error) error {
	if ps == nil || ps.gone || !errors.Is(err, ErrPeerLost) {
		return nil
	}
	if pc, ok := ds.d.(rdma.PeerChecker); ok {
		if cerr := pc.CheckPeer(ps.id); errors.Is(cerr, ErrStaleDescriptor) {
			return &PeerError{Peer: ps.addr, Cause: cerr}
		}
	}
	return nil
}

// liveness runs the periodic checks: the provider's check of recently
// used and watched peers, and heartbeats to watched peers.
func (w *worker) liveness() {
	if w.e.cfg.LivenessInterval < 0 {
		w.nextLiveness = noDeadline
		return
	}
	w.nextLiveness = w.now + int64(w.e.cfg.LivenessInterval)
	for _, ds := range w.doms {
		w.checkPeers(ds, false)
		w.probePeers(ds)
	}
}

// checkPeers asks a PeerChecker provider about the peers of ds: the
// recently used and watched ones, or all of them when urgent (an error
// completion that named no operation).
func (w *worker) checkPeers(ds *domState, urgent bool) {
	pc, ok := ds.d.(rdma.PeerChecker)
	if !ok {
		return
	}
	for _, ps := range ds.peerList {
		if ps.gone || (!urgent && ps.watched == 0 && w.now-ps.used > recentPeer) {
			continue
		}
		if err := pc.CheckPeer(ps.id); err != nil {
			w.peerLost(ds, ps, err, true)
		}
	}
}

// probePeers posts a heartbeat to each watched peer of ds that has none
// with the provider.
func (w *worker) probePeers(ds *domState) {
	pr, ok := ds.d.(rdma.PeerProber)
	if !ok {
		return
	}
	di := indexOf(w.doms, ds)
	timeout := int64(w.e.cfg.HandshakeTimeout)
	for _, ps := range ds.peerList {
		if ps.probing && ps.lost == nil && w.now-max(ps.probeAt, ps.answered) > timeout {
			// A heartbeat needs the peer's answer: none for the
			// handshake timeout, and no other op for the peer completed
			// meanwhile, means the link or the peer stopped.
			ds.stalled = true
			w.peerLost(ds, ps, reqErr("heartbeat", ErrTimeout, "unanswered for %v", w.e.cfg.HandshakeTimeout), false)
		}
		if ps.watched == 0 || ps.gone || ps.probing || ds.posted >= ds.depth {
			continue
		}
		op, ok := pr.ProbeOp(ps.id)
		if !ok {
			return
		}
		op.Context = ctxTagProbe | uint64(ps.idx)
		if r := w.immSrc; r != nil && op.Local == 0 {
			op.Local, op.LocalDesc = uint64(r.span.Addr), r.keys[di].Local
		}
		ds.probe[0] = op
		call := w.beginCall()
		n, err := ds.d.PostWrites(ds.probe[:])
		w.endCall(call)
		if n == 1 {
			ps.probing, ps.probeAt = true, w.now
			ds.posted++
			ds.probes++
			continue
		}
		if err != nil {
			w.noteOpError(ds, ps, err)
		}
	}
}

// probeDone takes a heartbeat's completion.
func (w *worker) probeDone(ds *domState, ev *rdma.Event) {
	i := int(ev.Context & ctxIndexMask)
	if i >= len(ds.peerList) || !ds.peerList[i].probing {
		w.unmatched(ds, ev)
		return
	}
	ps := ds.peerList[i]
	ps.probing = false
	ds.posted--
	ds.probes--
	if ev.Errno != 0 {
		w.noteOpError(ds, ps, ds.d.DescribeError(*ev))
		return
	}
	ps.answered = w.now
	w.peerBack(ds, ps)
}

// unmatched handles a completion that names no operation of this worker:
// an error completion whose provider lost its context (libfabric 1.17's
// shm reports a failed write to a peer that died with no context at all).
// The op it belonged to cannot be found from it, so the peers of the
// domain are checked at once: transfers to a peer found lost fail with
// ErrPeerLost, and anything else still ends at its deadline.
func (w *worker) unmatched(ds *domState, ev *rdma.Event) {
	ds.stats.Errors.Add(1)
	w.e.unmatchedErrs.Add(1)
	var err error
	if ev.Errno != 0 {
		err = ds.d.DescribeError(*ev)
	}
	w.e.log.Warn("ferry completion matches no operation: checking peers", "nic", ds.info.Name,
		"context", ev.Context, "kind", ev.Kind.String(), "err", err)
	w.checkPeers(ds, true)
}
