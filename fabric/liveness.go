package fabric

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
	// Ops come in runs to one peer: the last one resolved is compared
	// first (the raw names usually share their bytes, so the compare is
	// a length and a pointer), sparing the map its hash of the address.
	if p := ds.lastPeer; p != nil && p.addr == addr {
		return p, nil
	}
	if p, ok := ds.peers[addr]; ok {
		ds.lastPeer = p
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
	ds.lastPeer = p
	ds.stats.Peers.Add(1)
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
	w.peerHealth.swept = found[:0]
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
// and returns them (in w.peerHealth.swept; their work is not failed yet).
func (w *worker) sweepGone() []lostPeer {
	found := w.peerHealth.swept[:0]
	w.askProviders(func(ds *domState, ps *peerState, err error) {
		if w.declareLost(ds, ps, err, true) {
			found = append(found, lostPeer{ds, ps})
		}
	})
	w.peerHealth.swept = found
	return found
}

// askProviders asks each domain that can check its peers
// (rdma.PeerChecker) about every peer not yet gone for good, in order, and
// calls gone for each one its provider reports gone, with the evidence.
func (w *worker) askProviders(gone func(ds *domState, ps *peerState, err error)) {
	for _, ds := range w.doms {
		pc, ok := ds.d.(rdma.PeerChecker)
		if !ok {
			continue
		}
		for _, ps := range ds.peerList {
			if ps.gone {
				continue
			}
			if err := pc.CheckPeer(ps.id); err != nil {
				gone(ds, ps, err)
			}
		}
	}
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
	for i := range w.pool.ctxs {
		c := &w.pool.ctxs[i]
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
		if x := &w.pool.xfers[xi]; x.live && !x.reported {
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
	for i := range w.pool.xfers {
		if x := &w.pool.xfers[i]; x.live && !x.reported && x.kind == reqSend && x.peer == ps {
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
			if c.barrierKey(i, len(w.doms)).Addr == ps.addr {
				return true
			}
		}
	case c.kind == reqScatter:
		for j := range c.targets {
			if c.group != nil {
				if c.group.peers[c.first+j][c.dom] == ps {
					return true
				}
			} else if c.scatterKey(j, len(w.doms)).Addr == ps.addr {
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
		a = c.barrierKey(op, len(w.doms)).Addr
	case reqScatter:
		if op >= len(c.targets) {
			return nil
		}
		if c.group != nil {
			return c.group.peers[c.first+op][c.dom]
		}
		a = c.scatterKey(op, len(w.doms)).Addr
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
		w.peerHealth.nextLiveness = noDeadline
		return
	}
	w.peerHealth.nextLiveness = w.now + int64(w.e.cfg.LivenessInterval)
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
		if !w.postProbe(ds, di, pr, ps) {
			return
		}
	}
}

// postProbe posts one heartbeat to ps; false when the provider has none
// for it.
func (w *worker) postProbe(ds *domState, di int, pr rdma.PeerProber, ps *peerState) bool {
	op, ok := pr.ProbeOp(ps.id)
	if !ok {
		return false
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
	} else if err != nil {
		w.noteOpError(ds, ps, err)
	}
	return true
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

// lookForGonePeer checks, with the worker's state claimed, the peers of a
// worker that has been inside one provider call (started at start) for a
// while, on domains that can check them. A gone peer explains the call
// (shm spins for ever on the lock of a peer that died holding it): the
// peer is declared lost and the worker given up on. Otherwise the state
// goes back to the worker.
func (w *worker) lookForGonePeer(start int64) {
	s, ok := w.claimCall(start)
	if !ok {
		return
	}
	w.now = nanotime()
	type found struct {
		ds  *domState
		ps  *peerState
		err error
	}
	var lost []found
	w.askProviders(func(ds *domState, ps *peerState, err error) {
		lost = append(lost, found{ds, ps, err})
	})
	if len(lost) == 0 {
		w.releaseCall(s)
		return
	}
	// Abandon before the lost peers' failures reach anyone: a caller that
	// sees its transfer fail and submits again must find the worker
	// abandoned (ErrAbandoned), not queue behind the stuck call. The
	// failures are still delivered (report), the state being claimed;
	// the abandon channel, which ends waits on the worker's transfers with
	// ErrAbandoned, is closed only once they have been told of the peer.
	abandoned := w.exitState.CompareAndSwap(workerRunning, workerAbandoned)
	for _, l := range lost {
		w.peerLost(l.ds, l.ps, l.err, true)
	}
	w.flush()
	if abandoned {
		close(w.abandon)
	}
	w.takeClaimed(fmt.Sprintf("stuck in a provider call while peer %s is gone", lost[len(lost)-1].ps.addr))
}

// peerHealth is a worker's peer-liveness state: nextLiveness is when the
// periodic peer checks run next; lostLater are peers to declare lost once
// the pass ends (declareLostLater); swept is sweepGone's findings, reused;
// goneRegions are remote regions a write found unregistered
// (ErrUnknownRegion): later writes to them fail at accept, without a post
// (nil until the first).
type peerHealth struct {
	nextLiveness int64
	lostLater    []lostPeer
	swept        []lostPeer
	goneRegions  map[regionRef]struct{}
}

// errLocalClosed is why a peer that was an endpoint of this process is
// lost: it has been closed.
// Its engine is gone, and no later one takes its address: it is stale.
var errLocalClosed error = localClosedError{}

type localClosedError struct{}

func (localClosedError) Error() string {
	return "the endpoint, in this process, has been closed: " + ErrStaleDescriptor.Error()
}
func (localClosedError) Is(target error) bool { return target == ErrStaleDescriptor }

// Descriptors are trusted: a forged or stale one can complete successfully
// on tcp and shm while nothing lands at the target (see Descriptor). The
// engine can check the ones that name this process's own memory: every
// endpoint the process opens and every remotely writable region it
// registers is listed here, and a write whose target endpoint is local is
// checked against the list when it is accepted. That costs one boolean on
// the path of writes to other processes; for a write to this process
// (tests, loopback pipelines) one lock-free lookup, or, when the peer's
// last write used the same key and range and nothing left the lists since,
// one atomic load (localOK).

var local struct {
	addrs   sync.Map // Address -> struct{}: endpoints open in this process
	regions sync.Map // localKey -> localSpan: remotely writable registrations
	// gen changes whenever an endpoint or a region leaves the lists: a
	// peer's last check that passed (peerState.localOK) stands while gen
	// is what it was then.
	gen atomic.Uint64
}

type localKey struct {
	addr Address
	key  uint64
}

type localSpan struct{ base, len uint64 }

func addLocalEndpoint(a Address) { local.addrs.Store(a, struct{}{}) }
func removeLocalEndpoint(a Address) {
	local.addrs.Delete(a)
	local.gen.Add(1)
}

func isLocalEndpoint(a Address) bool {
	_, ok := local.addrs.Load(a)
	return ok
}

func addLocalRegion(r *registration) {
	for _, k := range r.desc.NICs {
		local.regions.Store(localKey{k.Addr, k.Key}, localSpan{uint64(r.span.Addr), r.span.Len})
	}
}

func removeLocalRegion(r *registration) {
	for _, k := range r.desc.NICs {
		local.regions.Delete(localKey{k.Addr, k.Key})
	}
	local.gen.Add(1)
}

// localOK is the last descriptor range checkLocal passed for a peer, and
// local.gen then: a peer's ops usually reuse one descriptor, and checking
// it again needs no lookup until something leaves the lists. A lookup in
// the lists hashes the endpoint address; it would cost more than the rest
// of accepting an op.
type localOK struct {
	gen, key, base, len uint64
}

// checkLocal checks a descriptor that names an endpoint of this process
// (p.local): the endpoint must still be open (else p is gone for good), its
// key a live registration there, and its range inside that registration.
func (w *worker) checkLocal(ds *domState, p *peerState, op string, k *RemoteKey, d *Descriptor) error {
	// gen is read before the lists: a removal after this read changes it,
	// so what passes below is checked again on the next op.
	gen := local.gen.Load()
	if c := &p.localOK; c.gen == gen && c.key == k.Key && c.base == d.Base && c.len == d.Length {
		return nil
	}
	v, ok := local.regions.Load(localKey{k.Addr, k.Key})
	if !ok && !isLocalEndpoint(k.Addr) {
		// Declared lost after this pass: the context being built must
		// not be failed under the code building it.
		w.peerHealth.lostLater = append(w.peerHealth.lostLater, lostPeer{ds, p})
		return &PeerError{Peer: p.addr, Cause: errLocalClosed}
	}
	if !ok {
		return reqErr(op, ErrUnknownRegion, "stale or forged descriptor: no live region of this process has key %#x on %s", k.Key, k.Addr)
	}
	s := v.(localSpan)
	if d.Base < s.base || d.Length > s.len || d.Base-s.base > s.len-d.Length {
		return reqErr(op, ErrOutOfBounds, "forged descriptor: [%#x, +%d) is not inside the region [%#x, +%d) key %#x names",
			d.Base, d.Length, s.base, s.len, k.Key)
	}
	p.localOK = localOK{gen: gen, key: k.Key, base: d.Base, len: d.Length}
	return nil
}

// lostPeer is a peer found gone while a request was being built.
type lostPeer struct {
	ds *domState
	p  *peerState
}

// declareLostLater declares the peers found gone during this pass lost.
func (w *worker) declareLostLater() {
	for _, l := range w.peerHealth.lostLater {
		w.peerLost(l.ds, l.p, errLocalClosed, true)
	}
	clear(w.peerHealth.lostLater)
	w.peerHealth.lostLater = w.peerHealth.lostLater[:0]
}
