package fabric

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// peerRegistry is the engine-wide view of lost peers, fed by the workers
// (see peer.go), and the watches and counters that depend on them.
type peerRegistry struct {
	mu    sync.Mutex
	lost  map[Address]*PeerError
	watch map[Address]int
	bound map[Address][]*immEntry
	fns   []func(*PeerError)
}

// notePeerLost records pe and fails the counters bound to its peer. It
// reports whether OnPeerLost callbacks are installed (the worker then
// queues them for the dispatcher). Called from a worker.
func (e *Engine) notePeerLost(pe *PeerError) bool {
	r := &e.peers
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lost == nil {
		r.lost = make(map[Address]*PeerError)
	}
	r.lost[pe.Peer] = pe
	for _, ent := range r.bound[pe.Peer] {
		ent.lost.Store(pe)
		ent.signal()
	}
	return len(r.fns) > 0
}

// notePeerBack forgets that addr was lost. Called from a worker.
func (e *Engine) notePeerBack(addr Address) {
	r := &e.peers
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.lost, addr)
	for _, ent := range r.bound[addr] {
		ent.lost.Store(nil)
	}
}

// LostPeers returns the peers the engine holds lost now (declared lost and
// not heard from since), sorted by address: what a monitor shows per peer.
func (e *Engine) LostPeers() []*PeerError {
	if e == nil {
		return nil
	}
	e.peers.mu.Lock()
	out := make([]*PeerError, 0, len(e.peers.lost))
	for _, pe := range e.peers.lost {
		out = append(out, pe)
	}
	e.peers.mu.Unlock()
	slices.SortFunc(out, func(a, b *PeerError) int { return strings.Compare(a.Peer.String(), b.Peer.String()) })
	return out
}

// runPeerLost calls the OnPeerLost callbacks; runs on the dispatcher.
func (e *Engine) runPeerLost(pe *PeerError) {
	e.peers.mu.Lock()
	fns := e.peers.fns
	e.peers.mu.Unlock()
	for _, fn := range fns {
		fn(pe)
	}
}

// PeerStatus returns nil unless the engine has declared the peer at addr
// lost, and then the *PeerError saying why (it wraps ErrPeerLost). A peer
// that completes work again (a restarted process on the same address) is
// cleared. Safe for concurrent use.
func (e *Engine) PeerStatus(addr Address) error {
	if e == nil {
		return errNilEngine
	}
	e.peers.mu.Lock()
	defer e.peers.mu.Unlock()
	if pe := e.peers.lost[addr]; pe != nil {
		return pe
	}
	return nil
}

// OnPeerLost adds fn to the callbacks the dispatcher runs each time a
// peer is declared lost (once per loss, per NIC address).
func (e *Engine) OnPeerLost(fn func(*PeerError)) {
	if e == nil {
		return
	}
	e.peers.mu.Lock()
	defer e.peers.mu.Unlock()
	e.peers.fns = append(slices.Clone(e.peers.fns), fn)
}

// WatchPeer has the engine check the liveness of the peer whose main
// address is addr even when nothing is sent to it: a receiver waiting for
// a peer's immediates learns that the peer died. The main worker's NIC 0
// checks it every Config.LivenessInterval, with the provider's check
// (shm: is the process alive) and, where the provider has one, a
// heartbeat (tcp: a zero-byte write a live peer ignores; a dead one
// refuses the connection; verbs: a zero-length write a live peer's NIC
// acknowledges, a dead one's retries run out). Loss shows in PeerStatus, OnPeerLost and the
// counters bound with ImmCounter.Watch. stop ends this watch; watches
// nest.
func (e *Engine) WatchPeer(addr Address) (stop func(), err error) {
	if e == nil {
		return nil, errNilEngine
	}
	if addr.IsZero() {
		return nil, fmt.Errorf("watch peer: empty address: %w", ErrInvalidArgument)
	}
	var resErr error
	if err := e.control(e.main(), func(w *worker) {
		ps, err := w.doms[0].resolve(addr)
		if err != nil {
			resErr = fmt.Errorf("watch peer %s: %w", addr, err)
			return
		}
		ps.watched++
		ps.used = w.now
	}); err != nil {
		return nil, err
	}
	if resErr != nil {
		return nil, resErr
	}
	e.peers.mu.Lock()
	if e.peers.watch == nil {
		e.peers.watch = make(map[Address]int)
	}
	e.peers.watch[addr]++
	e.peers.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			e.peers.mu.Lock()
			if e.peers.watch[addr]--; e.peers.watch[addr] == 0 {
				delete(e.peers.watch, addr)
			}
			e.peers.mu.Unlock()
			_ = e.control(e.main(), func(w *worker) {
				if ps := w.doms[0].peers[addr]; ps != nil && ps.watched > 0 {
					ps.watched--
				}
			})
		})
	}, nil
}

// Watch binds the counter to peers: once one of them is declared lost
// (see Engine.PeerStatus), Wait returns that *PeerError (wrapping
// ErrPeerLost), with its credits given back, instead of waiting for
// immediates that will not come; it clears again if the peer comes back.
// The engine watches the peers meanwhile (Engine.WatchPeer), so a peer
// this side never sends to is still checked. stop undoes both.
func (c *ImmCounter) Watch(peers ...Address) (stop func(), err error) {
	eng := c.e.eng
	var stops []func()
	undo := func() {
		for _, s := range stops {
			s()
		}
		eng.unbindCounter(c.e, peers)
	}
	eng.bindCounter(c.e, peers)
	for _, p := range peers {
		s, err := eng.WatchPeer(p)
		if err != nil {
			undo()
			return nil, err
		}
		stops = append(stops, s)
	}
	var once sync.Once
	return func() { once.Do(undo) }, nil
}

func (e *Engine) bindCounter(ent *immEntry, peers []Address) {
	r := &e.peers
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bound == nil {
		r.bound = make(map[Address][]*immEntry)
	}
	for _, p := range peers {
		r.bound[p] = append(r.bound[p], ent)
		if pe := r.lost[p]; pe != nil {
			ent.lost.Store(pe)
			ent.signal()
		}
	}
}

func (e *Engine) unbindCounter(ent *immEntry, peers []Address) {
	r := &e.peers
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range peers {
		l := r.bound[p]
		if i := slices.Index(l, ent); i >= 0 {
			l = slices.Delete(slices.Clone(l), i, i+1)
		}
		if len(l) == 0 {
			delete(r.bound, p)
		} else {
			r.bound[p] = l
		}
	}
	ent.lost.Store(nil)
}

// DeclarePeerLost declares the peer at addr lost on evidence from outside
// the engine, such as a directory reporting that the peer's entry expired
// because its process stopped renewing it. Every worker that has used addr
// fails the work queued to it with a *PeerError whose Cause is cause, new
// work to it fails fast, and PeerStatus, OnPeerLost and the counters bound
// to it with ImmCounter.Watch learn of it, as for a loss the engine found
// itself. The peer is not taken as gone for good: ops already posted to it
// stay fenced until the provider reports them, and one op per
// LivenessInterval is let through, so a peer that is in fact alive (its
// directory entry lapsed while it was cut off from the directory only)
// comes back on its own. A peer no worker has used yet is left alone:
// there is no work of this engine to fail. cause must not be nil.
func (e *Engine) DeclarePeerLost(addr Address, cause error) error {
	if e == nil {
		return errNilEngine
	}
	if addr.IsZero() {
		return fmt.Errorf("declare peer lost: empty address: %w", ErrInvalidArgument)
	}
	if cause == nil {
		return fmt.Errorf("declare peer lost %s: nil cause: %w", addr, ErrInvalidArgument)
	}
	for _, w := range e.workers {
		if err := e.control(w, func(w *worker) {
			for _, ds := range w.doms {
				if ps := ds.peers[addr]; ps != nil {
					w.peerLost(ds, ps, cause, false)
				}
			}
		}); err != nil {
			return fmt.Errorf("declare peer lost %s: %w", addr, err)
		}
	}
	return nil
}
