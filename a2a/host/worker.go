package host

import (
	"context"
	"fmt"

	"github.com/ferryrdma/ferry/a2a"
)

// The worker is the CPU side of the protocol that needs no caller: it
// waits for the count exchange and plans the receive side, and
// runs the barriers that gate buffer reuse. The caller's calls only pack,
// post what they can post at once, and copy, so DispatchSend returns
// before the counts arrive and DispatchRecv and CombineRecv return as soon
// as this rank's own data is in, without waiting for the slowest rank.
//
// Hand-offs are channels, so every buffer, the planner and the posted
// count are used by one goroutine at a time:
//
//	DispatchSend --stepPlan--> worker: wait counts, PlanRecv --planned--> DispatchRecv
//	DispatchRecv --stepDispatchBarrier--> worker: barrier, drain --txReady--> CombineSend
//	CombineRecv  --stepCombineBarrier--> worker: barrier, drain --txReady--> next DispatchSend
type step uint8

const (
	stepPlan step = iota + 1
	stepDispatchBarrier
	stepCombineBarrier
)

type worker struct {
	steps   chan step
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
		steps:   make(chan step, 3),
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

func (b *Backend) runWorker() {
	w := b.w
	defer close(w.done)
	for {
		var s step
		select {
		case s = <-w.steps:
		case <-w.ctx.Done():
			return
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

// await takes the worker's answer from ch, or gives up when ctx ends.
func await(ctx context.Context, ch chan error, what string) error {
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return fmt.Errorf("a2a host: waiting for %s: %w: %w", what, a2a.ErrTimeout, ctx.Err())
	}
}
