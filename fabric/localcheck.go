package fabric

import (
	"sync"
	"sync/atomic"
)

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

func addLocalRegion(r *MemoryRegion) {
	for _, k := range r.desc.NICs {
		local.regions.Store(localKey{k.Addr, k.Key}, localSpan{uint64(r.span.Addr), r.span.Len})
	}
}

func removeLocalRegion(r *MemoryRegion) {
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
		w.lostLater = append(w.lostLater, lostPeer{ds, p})
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
	for _, l := range w.lostLater {
		w.peerLost(l.ds, l.p, errLocalClosed, true)
	}
	clear(w.lostLater)
	w.lostLater = w.lostLater[:0]
}
