package fabric

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCloseTimeout bounds Close when its context has no deadline: the
// workers drain in-flight operations for this long, and Close gives up on
// a worker that has not stopped closeGrace later.
const DefaultCloseTimeout = 30 * time.Second

// closeGrace is how long after the drain deadline a context-less Close
// still waits for a worker to stop.
const closeGrace = 5 * time.Second

// errTransferAbandoned ends a Transfer.Wait whose worker Close gave up on.
var errTransferAbandoned = fmt.Errorf("transfer abandoned: its worker was stuck in a provider call: %w", ErrAbandoned)

// Worker exit states, settled once by whoever gets there first: the worker
// finishing, or Close giving up on it.
const (
	workerRunning int32 = iota
	workerExited
	workerAbandoned
)

// Close stops the engine: new calls fail with ErrClosed, and so do waits on
// immediate counters and submitters waiting for room in a full queue; work
// not yet posted fails with ErrClosed; in-flight operations drain until
// shortly before ctx's deadline (DefaultCloseTimeout without one), then
// their transfers fail with ErrClosed too and the error says how many
// operations were abandoned; memory is unregistered and the domains are
// closed. It waits for every goroutine it started.
//
// A worker stuck inside a provider call (libfabric's shm can spin for
// ever on a region lock a SIGKILLed peer held) cannot be stopped. Close
// still returns by ctx's deadline: it wakes the Transfer waits of that
// worker (ErrClosed) and returns an error wrapping ErrAbandoned that says
// what it left: that worker's domains stay open and the memory registered
// with them must not be freed. Its OnDone callbacks and TransferCounters
// are never called.
//
// Calling Close again returns the first result. Close from inside a
// callback returns only when ctx ends (the dispatcher is busy running that
// callback): prefer closing from elsewhere.
func (e *Engine) Close(ctx context.Context) error {
	if e == nil {
		return errNilEngine
	}
	e.life.closeOnce.Do(func() { e.life.closeErr = e.close(ctx) })
	return e.life.closeErr
}

func (e *Engine) close(ctx context.Context) error {
	e.life.closed.Store(true)
	close(e.life.closing)
	<-e.life.watchdogDone // it may be failing a stuck worker's transfers
	for _, ent := range *e.imms.counters.Load() {
		ent.signal() // ImmCounter waits end with ErrClosed
	}
	// Submitters in the queue's slow path see closing; the others are
	// between two atomics.
	for e.life.submitters.Load() > 0 && ctx.Err() == nil {
		time.Sleep(10 * time.Microsecond)
	}
	drain, giveUp := closeDeadlines(ctx)
	timer := time.NewTimer(time.Until(giveUp))
	defer timer.Stop()
	expired := false
	for _, w := range e.workers {
		if !expired && !w.stop(drain, timer.C) {
			expired = true
		}
	}
	var errs []error
	var stuck []*worker
	for _, w := range e.workers {
		if !expired && w.exitState.Load() != workerAbandoned {
			select {
			case <-w.exited:
			case <-timer.C:
				expired = true
			}
		}
		if st := w.exitState.Load(); st == workerAbandoned || (expired && st == workerRunning) {
			if err := w.giveUp(0, "did not stop by the close deadline"); err != nil {
				stuck = append(stuck, w)
				errs = append(errs, err)
				continue
			}
		}
		<-w.exited // it finished (it settled exitState first)
		if w.closeErr != nil {
			errs = append(errs, fmt.Errorf("group %s: %w", w.dev, w.closeErr))
		}
	}
	// Every submitter has left and every stop was sent: nobody kicks a
	// worker any more. A stuck worker closes its own when it returns.
	for _, w := range e.workers {
		if w.exitState.Load() == workerExited {
			w.sleep.wake.close()
		}
	}
	if e.disp != nil {
		e.disp.stop(ctx)
	}
	e.regs.mu.Lock()
	for r := range e.regs.regions {
		r.state.Store(regDead)
	}
	clear(e.regs.regions)
	e.regs.mu.Unlock()
	if len(stuck) == 0 || stuck[0] != e.main() {
		// The send and immediate buffers belong to the main worker's
		// domains: freed only when it closed them.
		if e.send.buf != nil {
			_ = e.send.buf.Free()
		}
		if e.immBuf != nil {
			_ = e.immBuf.Free()
		}
		e.notes.freeBuffers()
	}
	err := errors.Join(errs...)
	if err != nil {
		e.log.Warn("ferry engine closed with errors", "err", err)
	} else {
		e.log.Info("ferry engine closed")
	}
	return err
}

// closeDeadlines returns when the workers stop draining and when Close
// gives up waiting for them. With a context deadline the drain ends a
// little before it, so the workers can fail what is left and close their
// domains by then.
func closeDeadlines(ctx context.Context) (drain, giveUp time.Time) {
	d, ok := ctx.Deadline()
	if !ok {
		drain = time.Now().Add(DefaultCloseTimeout)
		return drain, drain.Add(closeGrace)
	}
	margin := min(time.Until(d)/10, 200*time.Millisecond)
	return d.Add(-max(margin, 0)), d
}

// stop asks the worker to drain and exit by deadline. The request is a
// control message, so the loop checks one channel per pass. It returns
// false if giveUp fired first (a stuck worker with a full control queue).
func (w *worker) stop(deadline time.Time, giveUp <-chan time.Time) bool {
	select {
	case w.queue.ctl <- func(w *worker) { w.stopping, w.deadline = true, deadline }:
		w.kick()
	case <-w.exited:
	case <-giveUp:
		return false
	}
	return true
}

// lifecycle is the engine's open-and-close state. closing is closed when
// Close starts; watchdogDone when the watchdog goroutine has ended (or at
// Open when there is none); submitters counts calls inside the engine
// (enter, leave), which Close waits out.
type lifecycle struct {
	closed       atomic.Bool
	closing      chan struct{}
	watchdogDone chan struct{}
	submitters   atomic.Int64
	closeOnce    sync.Once
	closeErr     error
}
