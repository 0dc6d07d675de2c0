package fabric

import (
	"runtime"
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
	procs    int32           // GOMAXPROCS when the worker started
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
// While the process's workers hold every P, a worker keeping its P would
// keep every other goroutine off the CPU for its whole yield phase, the
// submitter that would give it work among them (BenchmarkNullImm: two
// engines in one process on 2 Ps, a spinning writer and an adaptive
// target; the submitter's scheduling delay was most of the run), so it
// hands its P over then, as every yield did before fd077c0.
func (w *worker) yield() {
	if liveWorkers.Load() >= w.sleep.procs {
		runtime.Gosched()
		return
	}
	w.sleep.yielder.Yield()
}

// liveWorkers counts the process's running workers: each holds a P while
// it polls or yields (see yield).
var liveWorkers atomic.Int32

// startPolling is called on the worker's locked thread before its loop:
// it chooses how the worker yields; the returned func undoes it.
func (w *worker) startPolling() func() {
	w.sleep.yielder = osyield.New()
	w.sleep.procs = int32(runtime.GOMAXPROCS(0))
	liveWorkers.Add(1)
	return func() { liveWorkers.Add(-1) }
}

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
