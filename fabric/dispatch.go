package fabric

import (
	"context"
	"fmt"
	"time"
)

// The dispatcher runs user callbacks on one goroutine, so a slow callback
// delays other callbacks but never the workers: workers append to their
// outboxes (one lock per poll pass) and kick it.

type dispKind uint8

const (
	dispXfer dispKind = iota + 1
	dispImm
	dispImmReached
	dispRecv
	dispRecvData
	dispRecvErr
	dispPeerLost
)

type dispEvent struct {
	kind   dispKind
	fn     func(error)
	err    error
	imm    uint32
	ent    *immEntry
	onRecv func(int)
	onData func([]byte)
	onErr  func(error)
	data   []byte
	n      int
	slot   int32
	w      *worker
	perr   *PeerError
}

type dispatcher struct {
	e     *Engine
	kickc chan struct{}
	quit  chan struct{}
	done  chan struct{}
	batch []dispEvent
}

func newDispatcher(e *Engine) *dispatcher {
	return &dispatcher{e: e, kickc: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

func (d *dispatcher) kick() {
	select {
	case d.kickc <- struct{}{}:
	default:
	}
}

// stop ends the dispatcher after it delivered everything the (already
// exited) workers handed over. It gives up waiting when ctx ends, so a
// Close called from inside a callback (which the dispatcher is running)
// cannot deadlock past its deadline.
func (d *dispatcher) stop(ctx context.Context) {
	close(d.quit)
	select {
	case <-d.done:
	case <-ctx.Done():
	}
}

func (d *dispatcher) run() {
	defer close(d.done)
	for {
		select {
		case <-d.kickc:
			d.deliver()
		case <-d.quit:
			d.deliver()
			return
		}
	}
}

func (d *dispatcher) deliver() {
	d.batch = d.e.takeImmOut(d.batch[:0])
	for i := range d.batch {
		d.handle(&d.batch[i])
	}
	clear(d.batch)
	for _, w := range d.e.workers {
		w.outMu.Lock()
		d.batch, w.out = w.out, d.batch[:0]
		w.outMu.Unlock()
		for i := range d.batch {
			d.handle(&d.batch[i])
		}
		clear(d.batch)
	}
}

func (d *dispatcher) handle(ev *dispEvent) {
	defer func() {
		if p := recover(); p != nil {
			d.e.log.Error("ferry callback panicked", "panic", fmt.Sprint(p))
			if d.e.cfg.CloseOnCallbackPanic {
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					_ = d.e.Close(ctx)
				}()
			}
		}
	}()
	switch ev.kind {
	case dispXfer:
		ev.fn(ev.err)
	case dispImm:
		d.e.deliverImm(ev.imm)
	case dispImmReached:
		d.e.immReached(ev.ent)
	case dispRecv:
		ev.onRecv(ev.n)
		// Re-post the buffer now that the callback is done with it.
		r := request{kind: reqRecv, slot: ev.slot}
		_ = d.e.enqueue(ev.w, &r)
	case dispRecvData:
		ev.onData(ev.data)
	case dispRecvErr:
		ev.onErr(ev.err)
	case dispPeerLost:
		d.e.runPeerLost(ev.perr)
	}
}
