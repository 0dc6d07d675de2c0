package fabric

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Submission and back-pressure: submitters queue requests to a worker's
// channel; the worker takes at most reqsPerPass of them per pass, and only
// while fewer than Config.MaxPending of its transfers are unreported, so a
// worker whose peers stop taking writes stops its submitters (enqueueFull)
// instead of growing its queues.

// workQueue is a worker's side of submission and back-pressure.
type workQueue struct {
	reqs chan request
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

// acceptQueued accepts every request already in the queue.
func (w *worker) acceptQueued() {
	for {
		select {
		case r := <-w.queue.reqs:
			w.accept(&r)
		default:
			return
		}
	}
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
	select {
	case w.queue.reqs <- *r:
		return nil
	case <-w.exited:
		return ErrClosed
	case <-e.life.closing:
		return ErrClosed
	case <-w.abandon:
		return fmt.Errorf("%s: group %s: %w", r.kind, w.dev, ErrAbandoned)
	case <-timeout:
		return reqErr(r.kind.String(), ErrQueueFull, "the worker's queue stayed full until the request's deadline")
	case <-done:
		return reqErr(r.kind.String(), ctxErr(r.c.ctx), "context ended while the worker's queue was full")
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
		return fmt.Errorf("%s: group %s: %w", r.kind, w.dev, ErrAbandoned)
	}
	if t := r.c.t; t != nil && t.abandon.Load() != &w.abandon {
		// A Transfer is usually reused on one worker: the store (a locked
		// exchange) is paid when it changes, not per submit.
		t.abandon.Store(&w.abandon)
	}
	select {
	case w.queue.reqs <- *r:
	default:
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
