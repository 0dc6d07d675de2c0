package host

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/ferryrdma/ferry/a2a"
)

// The worker is the CPU side of the protocol that needs no caller: it
// waits for the count exchange and plans the receive side, and
// runs the barriers that gate buffer reuse. The caller's calls only pack,
// post what they can post at once, and copy, so DispatchSend returns
// before the counts arrive and DispatchRecv and CombineRecv return as soon
// as this rank's own data is in, without waiting for the slowest rank.
//
// Each step is handed over once and awaited once, in this order:
//
//	DispatchSend --stepPlan--> worker: wait counts, PlanRecv --planned--> DispatchRecv
//	DispatchRecv --stepDispatchBarrier--> worker: barrier, drain --txReady--> CombineSend
//	CombineRecv  --stepCombineBarrier--> worker: barrier, drain --txReady--> next DispatchSend
//
// Whoever claims a step first runs it: the worker, when it gets to run
// while the caller is away (computing between the calls), or the caller,
// when it comes to wait for a step the worker has not started. A caller
// that would only block until the worker is scheduled, runs the step,
// wakes it and hands back the answer, so runs it itself, woken by the
// engine. The claim (a compare-and-swap of the step's number) makes
// exactly one of them run it, so every buffer, the planner and the posted
// count are still used by one goroutine at a time.
type step uint8

const (
	stepPlan step = iota + 1
	stepDispatchBarrier
	stepCombineBarrier
)

type worker struct {
	// pending is the last step handed over: its number << 8 | the step.
	// taken is the number of the last step claimed. kick wakes the worker.
	pending atomic.Uint64
	taken   atomic.Uint64
	sent    uint64 // steps handed over (the caller's)
	kick    chan struct{}
	planned chan error
	txReady chan error
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	p       *a2a.Planner // set with stepPlan's first use
}

func (b *Backend) startWorker() {
	ctx, cancel := context.WithCancel(context.Background())
	b.w = &worker{
		kick:    make(chan struct{}, 1),
		planned: make(chan error, 1),
		txReady: make(chan error, 1),
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	b.w.txReady <- nil // buffers start free
	go b.runWorker()
}

// stopWorker ends the worker and waits for it.
func (b *Backend) stopWorker() {
	if b.w == nil {
		return
	}
	b.w.cancel()
	<-b.w.done
}

// hand gives step s to whoever claims it first (the caller's side).
func (w *worker) hand(s step) {
	w.sent++
	w.pending.Store(w.sent<<8 | uint64(s))
	select {
	case w.kick <- struct{}{}:
	default: // a wake is pending: the worker will see this step
	}
}

func (b *Backend) runWorker() {
	w := b.w
	defer close(w.done)
	for {
		select {
		case <-w.kick:
		case <-w.ctx.Done():
			return
		}
		v := w.pending.Load()
		n, s := v>>8, step(v&0xff)
		if !w.taken.CompareAndSwap(n-1, n) {
			continue // the caller runs it
		}
		// Each step waits for the other ranks: at most the timeout.
		ctx, cancel := context.WithTimeout(w.ctx, b.timeout)
		switch s {
		case stepPlan:
			w.reply(w.planned, b.plan(ctx, w.p))
		case stepDispatchBarrier:
			w.reply(w.txReady, b.wire.Barrier(ctx, a2a.TagDispatchBarrier))
		case stepCombineBarrier:
			w.reply(w.txReady, b.wire.Barrier(ctx, a2a.TagCombineBarrier))
		}
		cancel()
	}
}

// reply hands err to the caller's next wait. A caller that gave up never
// takes it, so the send must not outlive the worker.
func (w *worker) reply(ch chan error, err error) {
	select {
	case ch <- err:
	case <-w.ctx.Done():
	}
}

// plan waits for every group's count row and plans the receive side.
func (b *Backend) plan(ctx context.Context, p *a2a.Planner) error {
	if err := b.wire.Wait(ctx, a2a.TagRoute, p.Members().Live-1); err != nil {
		return err
	}
	return p.PlanRecv(b.words)
}

// await takes the answer of the last step handed over from ch (the
// worker's), or runs the step itself with run when the worker has not
// claimed it; it gives up when ctx ends.
func (w *worker) await(ctx context.Context, ch chan error, what string, run func() error) error {
	select {
	case err := <-ch:
		return err
	default:
	}
	if w.sent > 0 && w.taken.CompareAndSwap(w.sent-1, w.sent) {
		return run()
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return fmt.Errorf("a2a host: waiting for %s: %w: %w", what, a2a.ErrTimeout, ctx.Err())
	}
}
