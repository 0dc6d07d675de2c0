package fabric

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"
)

// Submission and back-pressure: submitters queue requests to a worker's
// ring (reqRing); the worker takes at most reqsPerPass of them per pass,
// and only while fewer than Config.MaxPending of its transfers are
// unreported, so a worker whose peers stop taking writes stops its
// submitters (enqueueFull) instead of growing its queues.

// workQueue is a worker's side of submission and back-pressure.
type workQueue struct {
	reqs reqRing
	ctl  chan func(*worker)
	// inflight counts transfers accepted and not finished.
	inflight int
	// live mirrors the transfer count (stored once per pass, by flush)
	// for a Close that gives up on the worker; unreported counts
	// transfers not yet reported, which Config.MaxPending bounds.
	live       atomic.Int64
	liveSeen   int64 // the value last stored in live (flush)
	unreported int
}

// reqRing is the worker's request queue: many submitters, one taker (the
// worker, or the watchdog once it has taken the worker's state). A
// submitter copies its request into a slot and the worker accepts it
// where it lies: one copy per request, and two locked instructions (the
// claim and the publish) where a channel took a lock to send, another to
// receive, and copied the request in and out.
//
// Each slot's seq says what it holds: pos when it is free for the request
// at position pos, pos+1 once that request is in it; taking the request
// sets it to pos+len(slots), freeing it for the next lap.
//
// The fields are kept on three groups of cache lines, by who writes them:
// what both sides only read (mask, slots, room, and waiters, written only
// by a submitter that waits); tail, which submitters change per request;
// head, which the taker changes per request, followed by the worker's own
// counters (workQueue). With head beside mask and slots, as before, every
// request the worker took moved the line the next submit read away from
// the submitter's core. A slot's sequence number has a line of its own,
// which an idle worker polls, and the request the lines after it: the
// submitter writes them without the poll pulling them back (the worker
// reads them once, after seq said they are ready), and no line holds
// parts of two slots.
type reqRing struct {
	mask  uint64
	slots []reqSlot
	room  chan struct{}
	// waiters counts submitters waiting for room (enqueueFull): the
	// worker then leaves a token in room after taking requests.
	waiters atomic.Int32
	_       [cacheLine]byte
	tail    atomic.Uint64 // the next position submitters claim
	_       [cacheLine]byte
	head    uint64 // the next position the taker takes
}

// cacheLine is the size of a cache line (on amd64 and arm64 servers), and
// the gap that keeps fields written by different cores apart wherever the
// structure holding them starts.
const cacheLine = 64

type reqSlot struct {
	seq atomic.Uint64
	_   [cacheLine - 8]byte
	r   request
	_   [(cacheLine - unsafe.Sizeof(request{})%cacheLine) % cacheLine]byte
}

// init sizes the ring to n (a power of two).
func (q *reqRing) init(n int) {
	q.slots = make([]reqSlot, n)
	q.mask = uint64(n - 1)
	for i := range q.slots {
		q.slots[i].seq.Store(uint64(i))
	}
	q.room = make(chan struct{}, 1)
}

// push queues a copy of r; false when the ring is full.
func (q *reqRing) push(r *request) bool {
	for {
		pos := q.tail.Load()
		s := &q.slots[pos&q.mask]
		switch seq := s.seq.Load(); {
		case seq == pos:
			if q.tail.CompareAndSwap(pos, pos+1) {
				s.r = *r
				s.seq.Store(pos + 1)
				return true
			}
		case seq < pos:
			return false // the slot still holds the request of the lap before
		}
		// Another submitter claimed pos first: try the next one.
	}
}

// peek returns the next request, in its slot, or nil if there is none;
// the taker calls pop when done with it.
func (q *reqRing) peek() *request {
	s := &q.slots[q.head&q.mask]
	if s.seq.Load() != q.head+1 {
		return nil
	}
	return &s.r
}

// pop frees the slot of the request peek returned.
func (q *reqRing) pop() {
	s := &q.slots[q.head&q.mask]
	s.r = request{} // drop its references
	s.seq.Store(q.head + uint64(len(q.slots)))
	q.head++
}

// empty reports whether no request is ready to take.
func (q *reqRing) empty() bool { return q.slots[q.head&q.mask].seq.Load() != q.head+1 }

// signalRoom wakes one submitter waiting for room, if any.
func (q *reqRing) signalRoom() {
	if q.waiters.Load() > 0 {
		select {
		case q.room <- struct{}{}:
		default: // a token is already waiting
		}
	}
}

// acceptQueued accepts every request already in the queue.
func (w *worker) acceptQueued() {
	q := &w.queue.reqs
	n := 0
	for r := q.peek(); r != nil; r = q.peek() {
		w.accept(r)
		q.pop()
		n++
	}
	if n > 0 {
		q.signalRoom()
	}
}

// acceptPass accepts up to reqsPerPass requests, while fewer than
// Config.MaxPending transfers are unreported, and reports whether it took
// any.
func (w *worker) acceptPass() bool {
	q := &w.queue.reqs
	n := 0
	for ; n < reqsPerPass && w.queue.unreported < w.e.cfg.MaxPending; n++ {
		r := q.peek()
		if r == nil {
			break
		}
		w.accept(r)
		q.pop()
	}
	if n == 0 {
		return false
	}
	q.signalRoom()
	return true
}

// takeQueued calls f on every request left in the queue and takes it.
func (w *worker) takeQueued(f func(r *request)) {
	q := &w.queue.reqs
	for r := q.peek(); r != nil; r = q.peek() {
		f(r)
		q.pop()
	}
	q.signalRoom()
}

// kick wakes the worker if it sleeps.
func (w *worker) kick() {
	if w.sleep.sleeping.Load() {
		w.sleep.wake.signal()
	}
}

// enqueueFull waits for room in w's full queue until the request's
// deadline (its Completion's, else Config.RequestTimeout), its context, or
// Close. This is the engine's back-pressure: a worker accepts at most
// Config.MaxPending unfinished transfers, so a peer that stops taking
// writes stops their submitters here instead of growing the queues.
func (e *Engine) enqueueFull(w *worker, r *request) error {
	q := &w.queue.reqs
	q.waiters.Add(1)
	defer q.waiters.Add(-1)
	var timeout <-chan time.Time
	wait := time.Duration(-1)
	switch d := r.c.deadline; {
	case d == 0:
		wait = e.cfg.RequestTimeout
	case d != noDeadline:
		wait = max(time.Duration(d-nanotime()), 0)
	}
	if wait >= 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	var done <-chan struct{}
	if r.c.ctx != nil {
		done = r.c.ctx.Done()
	}
	for {
		// Counted among the waiters before this try: a worker taking
		// requests after it leaves a token.
		if q.push(r) {
			if q.waiters.Load() > 1 {
				q.signalRoom() // the next waiter tries too
			}
			return nil
		}
		select {
		case <-q.room:
		case <-w.exited:
			return ErrClosed
		case <-e.life.closing:
			return ErrClosed
		case <-w.abandon:
			return fmt.Errorf("%s: group %s: %w", r.kind.name(r.flags), w.dev, ErrAbandoned)
		case <-timeout:
			return reqErr(r.kind.name(r.flags), ErrQueueFull, "the worker's queue stayed full until the request's deadline")
		case <-done:
			return reqErr(r.kind.name(r.flags), ctxErr(r.c.ctx), "context ended while the worker's queue was full")
		}
	}
}

// enqueue hands r to w without blocking on the NIC. While the worker's
// queue is full it waits, as back-pressure, until the request's deadline
// (see enqueueFull).
func (e *Engine) enqueue(w *worker, r *request) error {
	if err := r.c.begin(); err != nil {
		return err
	}
	if !e.enter() {
		r.c.abort()
		return ErrClosed
	}
	if w.exitState.Load() == workerAbandoned {
		e.leave()
		r.c.abort()
		return fmt.Errorf("%s: group %s: %w", r.kind.name(r.flags), w.dev, ErrAbandoned)
	}
	if t := r.c.t; t != nil && t.abandon.Load() != &w.abandon {
		// A Transfer is usually reused on one worker: the store (a locked
		// exchange) is paid when it changes, not per submit.
		t.abandon.Store(&w.abandon)
	}
	if !w.queue.reqs.push(r) {
		if err := e.enqueueFull(w, r); err != nil {
			e.leave()
			r.c.abort()
			return err
		}
	}
	w.kick()
	e.leave()
	return nil
}
