package fabric

import "time"

// Deadlines. Every transfer gets one when it is accepted: its Completion's
// (WithDeadline, WithContext) or now + Config.RequestTimeout. The worker
// does not keep them sorted: it remembers the earliest deadline it has
// seen (nextScan) and, once the clock passes it, walks its transfers once,
// fails those that are due and computes the next earliest. With steady
// traffic that is one walk per RequestTimeout; the per-op path only
// compares two integers.
//
// A transfer that fails this way is reported at once. What the worker has
// not yet posted of it is dropped; what the provider holds is fenced: the
// transfer keeps its slot and its op contexts until their completions come
// back (or their peer is declared lost), so a late completion finds the
// slot it belongs to and changes nothing anyone sees, and the source
// memory stays registered while a NIC may still read it.

// ctxPollInterval is how often the worker looks at the contexts of
// transfers bound to one (WithContext) for a cancellation.
const ctxPollInterval = 5 * int64(time.Millisecond)

// watchDeadline gives a new transfer its deadline and makes sure the
// worker will look at it in time.
func (w *worker) watchDeadline(x *xferSlot) {
	if x.deadline == 0 {
		x.deadline = w.defaultDeadline()
	}
	if x.deadline < w.deadlines.nextScan {
		w.deadlines.nextScan = x.deadline
	}
	if x.c.ctx != nil {
		w.deadlines.ctxWatched++
		w.deadlines.nextScan = min(w.deadlines.nextScan, w.now+ctxPollInterval)
	}
}

func (w *worker) defaultDeadline() int64 {
	t := w.e.cfg.RequestTimeout
	if t < 0 {
		return noDeadline
	}
	return w.now + int64(t)
}

// scanDeadlines fails every unreported transfer whose deadline has passed
// or whose context was cancelled, and sets the next time to look.
func (w *worker) scanDeadlines() {
	next := int64(noDeadline)
	for i := range w.pool.xfers {
		x := &w.pool.xfers[i]
		if !x.live || x.reported {
			continue
		}
		if x.deadline <= w.now {
			w.expire(uint32(i), reqErr(x.name(), ErrTimeout, "deadline passed %v after the transfer was accepted",
				time.Duration(w.now-x.start).Round(time.Millisecond)))
			continue
		}
		if ctx := x.c.ctx; ctx != nil {
			select {
			case <-ctx.Done():
				w.expire(uint32(i), reqErr(x.name(), ctxErr(ctx), "context ended %v after the transfer was accepted",
					time.Duration(w.now-x.start).Round(time.Millisecond)))
				continue
			default:
			}
			next = min(next, w.now+ctxPollInterval)
		}
		next = min(next, x.deadline)
	}
	w.deadlines.nextScan = next
}

// expire ends transfer xi now with err (its first error, if it already
// had one). Unposted sends go at once; unposted writes are dropped as they
// reach the head of their FIFO; posted ops keep the slot fenced.
func (w *worker) expire(xi uint32, err error) {
	x := &w.pool.xfers[xi]
	if x.err == nil {
		x.err = err
	}
	w.e.expired.Add(1)
	if x.pending == 0 && x.kind != reqSend {
		w.completeXfer(xi)
		return
	}
	w.report(x)
	if x.kind == reqSend {
		w.dropQueuedSend(xi)
	}
}

// dropQueuedSend finishes send xi if it is still queued, unposted.
func (w *worker) dropQueuedSend(xi uint32) {
	for _, ds := range w.doms {
		for i := range ds.sendQ {
			if uint32(ds.sendQ[i].Context&ctxIndexMask) == xi {
				ds.sendQ = append(ds.sendQ[:i], ds.sendQ[i+1:]...)
				w.completeXfer(xi)
				return
			}
		}
	}
}

// deadlineScan is a worker's deadline state: nextScan is the earliest
// deadline the worker knows of (see scanDeadlines); ctxWatched counts
// transfers bound to a context.
type deadlineScan struct {
	nextScan   int64
	ctxWatched int
}
