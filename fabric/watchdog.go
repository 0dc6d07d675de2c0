package fabric

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// The watchdog. It judges progress, not the wall time of one call: writes
// are posted in bounded pieces (split.go), so calls end while a transfer
// of any length runs, and a provider that copies inside its calls (mem,
// ipc) shows the bytes it moved (ProgressReporter), so a slow copy is not
// taken for a stuck call. A provider call can block for ever: libfabric 1.17's shm
// spins on the region lock of a peer that was SIGKILLed while holding it,
// inside the post call of the worker that writes to that peer. No deadline
// can fire then, since deadlines are the worker's own work. So every
// provider call of the data path (posts and polls) is bracketed by a
// timestamp (callStart), and a watchdog goroutine gives up on a worker
// that has been inside one call for Config.StuckTimeout:
//
//   - it claims the worker's state with a compare-and-swap on callStart,
//     which succeeds only while the worker is still inside that call, and
//     which the worker checks (with its own compare-and-swap) when the
//     call returns: a worker whose state is being looked at waits, and
//     one whose state was taken touches nothing more and ends its
//     goroutine;
//   - a worker inside one call for a second already, on a domain that can
//     check its peers (shm), has its peers checked (state claimed, then
//     given back): if one is gone, that is the call's reason and the
//     worker is given up on at once rather than after StuckTimeout;
//   - with the state claimed, it fails every transfer the worker held and
//     every request still queued to it (ErrAbandoned), on their Transfer,
//     TransferCounter and OnDone, and tells receives;
//   - the worker's submits fail from then on with ErrAbandoned; the rest
//     of the engine keeps serving, and Close leaves that worker's domains
//     open (their memory must not be freed).

// watchdogState is the worker's part of the watchdog. reporters are the
// domains that show progress inside a call, set at open, before the
// watchdog starts, and only read after; progSeen and progAt are the
// watchdog's: the sum of their counters and when it last changed.
// callStart is when the provider call the worker is in started
// (nanotime), 0 outside one, -1 once claimed; claimed and stuckErr belong
// to whoever claimed it.
type watchdogState struct {
	reporters []rdma.ProgressReporter
	progSeen  uint64
	progAt    int64
	callStart atomic.Int64
	claimed   bool
	stuckErr  error
}

// callStart values besides a start time.
const (
	callClaimed = -1 // the watchdog is looking at the worker's state
	callTaken   = -2 // the worker was given up on: its state is not its own
)

// moved reports when the bytes the worker's domains moved inside their
// calls (ProgressReporter) last changed, as seen at the watchdog's ticks;
// 0 when none can tell.
func (w *worker) moved(now int64) int64 {
	if len(w.watchdog.reporters) == 0 {
		return 0
	}
	var sum uint64
	for _, r := range w.watchdog.reporters {
		sum += r.Progress()
	}
	if sum != w.watchdog.progSeen {
		w.watchdog.progSeen, w.watchdog.progAt = sum, now
	}
	return w.watchdog.progAt
}

// quickStuck is how long a call must last before the watchdog checks the
// worker's peers for a gone one.
const quickStuck = int64(time.Second)

// beginCall marks the start of a provider call of the data path.
func (w *worker) beginCall() int64 {
	t := max(w.now, 1)
	w.watchdog.callStart.Store(t)
	return t
}

// endCall marks its end. If the watchdog or Close gave up on the worker
// while it was inside, its state now belongs to them: the worker's
// goroutine ends here (running only its deferred calls).
func (w *worker) endCall(t int64) {
	if w.watchdog.callStart.CompareAndSwap(t, 0) {
		return
	}
	for {
		switch w.watchdog.callStart.Load() {
		case callClaimed:
			runtime.Gosched() // the watchdog is looking; it gives back or takes
		case t:
			if w.watchdog.callStart.CompareAndSwap(t, 0) {
				return
			}
		default:
			runtime.Goexit()
		}
	}
}

// claimCall takes the worker's state if the worker is inside a provider
// call (that it started before since, if since > 0) and returns when that
// call started; the caller gives it back (releaseCall) or takes it for
// good (callTaken).
func (w *worker) claimCall(since int64) (int64, bool) {
	s := w.watchdog.callStart.Load()
	if s > 0 && (since == 0 || s <= since) && w.watchdog.callStart.CompareAndSwap(s, callClaimed) {
		return s, true
	}
	return 0, false
}

// releaseCall gives a claimed worker its state back.
func (w *worker) releaseCall(start int64) { w.watchdog.callStart.Store(start) }

// runWatchdog looks at the workers every quarter of the stuck timeout (at
// least every 250 ms) until Close.
func (e *Engine) runWatchdog() {
	defer close(e.life.watchdogDone)
	stuck := e.cfg.StuckTimeout
	tick := time.NewTicker(min(max(stuck/4, 10*time.Millisecond), 250*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-e.life.closing:
			return
		case <-tick.C:
		}
		now := nanotime()
		for _, w := range e.workers {
			// A call that keeps moving bytes is not stuck, however long
			// it lasts: what counts is the time since the later of its
			// start and its last progress.
			moved := w.moved(now)
			switch s := w.watchdog.callStart.Load(); {
			case s > 0 && now-max(s, moved) > int64(stuck):
				w.giveUp(now-int64(stuck), fmt.Sprintf("stuck in a provider call for more than %v", stuck))
			case s > 0 && now-s > quickStuck:
				w.lookForGonePeer(s)
			}
			if w.watchdog.claimed {
				w.failQueued() // requests that slipped in since
			}
		}
	}
}

// giveUp abandons the worker (once) and, if it can claim the worker's
// state (the worker is inside a provider call started before since, or
// any call when since is 0), fails everything the worker held. It returns
// the error that says so.
func (w *worker) giveUp(since int64, why string) error {
	if w.exitState.CompareAndSwap(workerRunning, workerAbandoned) {
		close(w.abandon)
	} else if w.exitState.Load() != workerAbandoned {
		return nil // it finished meanwhile
	}
	if !w.watchdog.claimed {
		if _, ok := w.claimCall(since); ok {
			w.takeClaimed(why)
		}
	}
	if w.watchdog.stuckErr != nil {
		return w.watchdog.stuckErr
	}
	var posted int64
	for _, ds := range w.doms {
		posted += ds.stats.InFlight.Load()
	}
	return fmt.Errorf("group %s: the worker did not stop by the close deadline (stuck in a provider call?): "+
		"%d transfers and %d posted operations abandoned; its domains stay open and the memory registered "+
		"with them must not be freed: %w", w.dev, w.queue.live.Load(), posted, ErrAbandoned)
}

// takeClaimed gives up for good on a worker whose state the caller has
// claimed, failing everything it held.
func (w *worker) takeClaimed(why string) {
	w.watchdog.claimed = true
	w.watchdog.stuckErr = fmt.Errorf("group %s: worker %s: abandoned: %w", w.dev, why, ErrAbandoned)
	w.e.log.Error("ferry worker abandoned", "device", w.dev.String(), "why", why)
	w.failHeld(w.watchdog.stuckErr)
	w.watchdog.callStart.Store(callTaken)
}

// failHeld fails every transfer, queued request and receive of a claimed
// worker.
func (w *worker) failHeld(err error) {
	for i := range w.pool.xfers {
		x := &w.pool.xfers[i]
		if x.live && !x.reported {
			x.reported = true
			w.deliver(x.c, err)
			x.c = Completion{}
		}
	}
	w.failQueued()
	for i := range w.recvs {
		if w.recvs[i].live {
			w.recvFailed(i, err)
		}
	}
	w.flush()
}

// failQueued fails the requests waiting in a claimed worker's queue.
func (w *worker) failQueued() {
	w.takeQueued(func(r *request) {
		if r.kind == reqSend {
			w.e.releaseSendSlot(r.slot)
		}
		if r.kind != reqRecv {
			w.deliver(r.c, w.watchdog.stuckErr)
		}
	})
	w.flush()
}
