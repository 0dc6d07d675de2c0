package fabric

import (
	"sync/atomic"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/osyield"
)

// Polling and sleep: an idle worker spins, then yields, then sleeps on its
// waker (Config.Poll); submitters and sleeping domains' peers wake it.

// sleepState is a worker's polling policy state.
type sleepState struct {
	sleeping atomic.Bool
	yielder  osyield.Yielder // chosen when the worker started (see yield)
	wake     waker
	sleepers []rdma.Sleeper // domains whose peers can wake the worker
	busyPoll bool           // an empty poll looked like provider progress work
}

// idle paces an adaptive worker with nothing to do: spin, then yield,
// then sleep. Go timers cannot sleep less than about a millisecond here
// (the runtime's poller waits in whole milliseconds), which would throttle
// manual-progress providers whose data moves only while both sides poll,
// so the worker sleeps in ppoll on its wake eventfd instead: microsecond
// timeouts, and a submitter or control call that finds it asleep wakes it
// at once. Sleeps stay at 10 µs while ops are in flight or while empty
// polls look like provider progress work (see poll), and otherwise grow to
// 1 ms, so an idle engine costs a few percent of a core. Domains whose
// peers can wake the worker (Sleeper, the ipc transport) are armed first,
// so their immediates end a sleep at once instead of at its timeout.
func (w *worker) idle(n int) {
	switch {
	case n < idleSpins:
		return
	case n < idleSleepFrom:
		w.yield()
		return
	}
	d := 10 * time.Microsecond
	if w.queue.inflight == 0 && w.opsInFlight() == 0 {
		d = time.Duration(min(n-idleSleepFrom+1, 100)) * 10 * time.Microsecond
	}
	w.sleep.sleeping.Store(true)
	if w.queue.reqs.empty() && len(w.queue.ctl) == 0 && w.prepareSleep() {
		w.sleep.wake.sleep(d, len(w.sleep.sleepers) > 0)
		for _, s := range w.sleep.sleepers {
			s.Awake()
		}
	}
	w.sleep.sleeping.Store(false)
}

// yield gives the worker's core away once (osyield: sched_yield keeps the
// locked worker's P, Gosched would hand it off through two futex calls).
func (w *worker) yield() { w.sleep.yielder.Yield() }

// prepareSleep arms the domains peers can wake (see Sleeper); false means
// one of them has work already, and nothing is left armed.
func (w *worker) prepareSleep() bool {
	for i, s := range w.sleep.sleepers {
		if !s.PrepareSleep() {
			for _, o := range w.sleep.sleepers[:i] {
				o.Awake()
			}
			return false
		}
	}
	return true
}
