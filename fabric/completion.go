package fabric

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/ferryrdma/ferry/internal/futex"
)

// Completion says how a transfer reports its end: exactly once, with nil or
// its error. The zero value reports nothing (errors still count in Stats).
// Build one with OnDone, Notify or Count.
type Completion struct {
	fn      func(error)
	t       *Transfer
	counter *TransferCounter
	// deadline is when the transfer fails with ErrTimeout, on the
	// runtime's monotonic clock (nanotime): 0 takes the engine's
	// Config.RequestTimeout, noDeadline means none.
	deadline int64
	// ctx, when set, fails the transfer with its error if it is cancelled
	// first (WithContext).
	ctx context.Context
}

// noDeadline is a Completion deadline that never passes.
const noDeadline = math.MaxInt64

// WithDeadline returns c with the transfer's deadline set to d, instead of
// the engine's Config.RequestTimeout. A transfer still running at its
// deadline ends with an error wrapping ErrTimeout; operations the provider
// already holds are fenced: the worker absorbs their late completions, and
// their memory stays registered until they have finished. The zero Time
// means no deadline at all.
func (c Completion) WithDeadline(d time.Time) Completion {
	if d.IsZero() {
		c.deadline = noDeadline
		return c
	}
	c.deadline = monoTime(d)
	return c
}

// WithContext returns c bound to ctx: ctx's deadline, when it has one,
// replaces the engine's Config.RequestTimeout, and if ctx is cancelled
// before the transfer ends the transfer fails with ctx's error (the worker
// looks every few milliseconds), fenced as WithDeadline describes.
func (c Completion) WithContext(ctx context.Context) Completion {
	if d, ok := ctx.Deadline(); ok {
		c.deadline = monoTime(d)
	}
	if ctx.Done() != nil {
		c.ctx = ctx
	}
	return c
}

// monoTime converts a wall-clock instant to the monotonic clock the worker
// reads; an instant already past becomes the earliest valid deadline.
func monoTime(d time.Time) int64 {
	return max(nanotime()+int64(time.Until(d)), 1)
}

// OnDone runs fn on the engine's dispatcher goroutine when the transfer
// ends. fn must not block for long: it delays every other callback.
func OnDone(fn func(error)) Completion { return Completion{fn: fn} }

// Notify releases t.Wait when the transfer ends.
func Notify(t *Transfer) Completion { return Completion{t: t} }

// Count adds the transfer's end to c, with no callback and no dispatcher
// hop: the worker updates c's atomics directly.
func Count(c *TransferCounter) Completion { return Completion{counter: c} }

// Transfer is a reusable handle on one transfer at a time: submit with
// Notify(t), then Wait. Resubmitting before Wait returned fails with ErrBusy.
// A Transfer is safe for one submitter and one waiter.
type Transfer struct {
	busy atomic.Bool
	done chan error
	// abandon is the abandon channel of the worker the transfer was
	// queued to: Close closes it when it gives up on a stuck worker.
	abandon atomic.Pointer[chan struct{}]
}

// NewTransfer returns an idle handle.
func NewTransfer() *Transfer { return &Transfer{done: make(chan error, 1)} }

// Wait blocks until the transfer ends and returns its error, or returns
// ctx's error (wrapping ErrTimeout) if ctx ends first; the transfer then
// still runs, and a later Wait collects it. A transfer whose worker the
// engine gave up on (stuck in a provider call) ends with ErrAbandoned.
func (t *Transfer) Wait(ctx context.Context) error {
	select {
	case err := <-t.done:
		t.busy.Store(false)
		return err
	default:
	}
	var abandon <-chan struct{}
	if p := t.abandon.Load(); p != nil {
		abandon = *p
	}
	select {
	case err := <-t.done:
		t.busy.Store(false)
		return err
	case <-ctx.Done():
		return ctxErr(ctx)
	case <-abandon:
		t.busy.Store(false)
		return errTransferAbandoned
	}
}

func (t *Transfer) finish(err error) { t.done <- err }

// TransferCounter is the callback-free completion path: each finished
// transfer adds 1 to Done; a failed one also adds 1 to Errors (so a waiter
// counting Done never hangs on a failure). Safe for concurrent use.
type TransferCounter struct {
	done   atomic.Int64
	errors atomic.Int64
	first  atomic.Pointer[error]
	// A Wait that spun and yielded in vain sleeps until the completion
	// that brings Done to its count wakes it: sleepers counts such waits,
	// so a completion with nobody asleep pays one atomic load; want is
	// the lowest count a sleeping wait asked for (noWant when none). They
	// sleep on the futex word wakes, not on a channel: a send readies the
	// receiver on the worker's P, which a locked thread holds while it
	// spins or yields, so the waiter waited to be stolen or for the
	// worker's preemption (NullImm 0.3 to 5-100 µs per op on a loaded
	// machine). The completion bumps the word before waking them all; the
	// waits not yet satisfied register again. Completions below want wake
	// nobody: a wait for the 256th completion from now is not woken 256
	// times.
	sleepers atomic.Int32
	wakes    atomic.Uint32
	want     atomic.Int64
}

// noteErr records err; only the error path pays for the heap copy.
func (c *TransferCounter) noteErr(err error) {
	c.first.CompareAndSwap(nil, &err)
	c.errors.Add(1)
}

// noWant is TransferCounter.want with no wait asleep. The zero value
// (a new counter) means the same: lowerWant treats both as unset.
const noWant = math.MaxInt64

// arrived wakes the sleeping waits once Done, now done, reached the
// lowest count one of them waits for.
func (c *TransferCounter) arrived(done int64) {
	if c.sleepers.Load() == 0 {
		return
	}
	w := c.want.Load()
	if w == 0 || done < w {
		return
	}
	// Reset only what was read: a wait that lowered it since keeps its
	// count (and is woken now anyway).
	c.want.CompareAndSwap(w, noWant)
	c.wakes.Add(1)
	futex.WakeAll(&c.wakes, futex.Private)
}

// lowerWant makes want at most n.
func (c *TransferCounter) lowerWant(n int64) {
	for {
		w := c.want.Load()
		if w != 0 && w <= n {
			return
		}
		if c.want.CompareAndSwap(w, n) {
			return
		}
	}
}

// Err returns the first error counted, or nil.
func (c *TransferCounter) Err() error {
	if p := c.first.Load(); p != nil {
		return *p
	}
	return nil
}

// Done returns the number of finished transfers.
func (c *TransferCounter) Done() int64 { return c.done.Load() }

// Errors returns the number of failed transfers.
func (c *TransferCounter) Errors() int64 { return c.errors.Load() }

// Wait waits until Done reaches n or ctx ends: it spins and yields
// briefly, then sleeps until a completion wakes it (any number of waits at
// once), looking at ctx at least every waitCtxStep while asleep. It
// allocates nothing. It returns ErrProvider-wrapping information only
// through Errors; its own error is only the context's.
func (c *TransferCounter) Wait(ctx context.Context, n int64) error {
	var b backoff
	for i := 1; c.done.Load() < n; i++ {
		if i < backoffSpins+backoffYields { // b spins, then yields: never its sleeps
			if err := b.wait(ctx); err != nil {
				return err
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return ctxErr(ctx)
		}
		step := waitCtxStep
		if ctx.Done() == nil {
			step = waitIdleStep
		}
		if d, ok := ctx.Deadline(); ok {
			step = min(step, time.Until(d))
		}
		// In this order: counted among the sleepers, the word read, the
		// count registered, Done read. A completion reaching n before
		// that read of Done is seen by it; one after it sees this wait
		// and n in want (arrived loads them after adding to Done), or a
		// want reset after this wait found its count covered, and then
		// it changes the word after this wait read it: either way the
		// sleep below does not start or ends.
		c.sleepers.Add(1)
		v := c.wakes.Load()
		c.lowerWant(n)
		if c.done.Load() < n {
			futex.Wait(&c.wakes, v, step, futex.Private)
		}
		c.sleepers.Add(-1)
	}
	return nil
}

// A sleeping TransferCounter.Wait looks at its context every waitCtxStep
// (a completion wakes it at once); without a context that can end, every
// waitIdleStep, only as a guard.
const (
	waitCtxStep  = time.Millisecond
	waitIdleStep = 100 * time.Millisecond
)

func (c Completion) begin() error {
	if c.t != nil && !c.t.busy.CompareAndSwap(false, true) {
		return ErrBusy
	}
	return nil
}

// abort undoes begin for a request that was refused.
func (c Completion) abort() {
	if c.t != nil {
		c.t.busy.Store(false)
	}
}

// needsDispatch reports whether finishing needs the dispatcher goroutine.
func (c Completion) needsDispatch() bool { return c.fn != nil }

// finishDirect completes the parts that never block: handle and counter.
func (c Completion) finishDirect(err error) {
	if c.counter != nil {
		if err != nil {
			c.counter.noteErr(err)
		}
		c.counter.arrived(c.counter.done.Add(1))
	}
	if c.t != nil {
		c.t.finish(err)
	}
}

func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if err == context.DeadlineExceeded {
		return &waitError{err}
	}
	return err
}

// waitError is a context deadline, reported as ErrTimeout too.
type waitError struct{ err error }

func (e *waitError) Error() string        { return "wait: " + e.err.Error() }
func (e *waitError) Unwrap() error        { return e.err }
func (e *waitError) Is(target error) bool { return target == ErrTimeout }
