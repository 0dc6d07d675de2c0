package cuda

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/ferryrdma/ferry/internal/cudadrv"
)

// CaptureMode says which other calls a capture forbids while it runs.
type CaptureMode int

const (
	// CaptureGlobal (the default) makes unsafe calls such as cuMemAlloc fail
	// in every thread while the capture runs, so none is silently left
	// out of the graph.
	CaptureGlobal CaptureMode = cudadrv.CaptureModeGlobal
	// CaptureRelaxed forbids nothing.
	CaptureRelaxed CaptureMode = cudadrv.CaptureModeRelaxed
)

// Graph is work captured from a stream, ready to be instantiated.
type Graph struct {
	ctx *Context
	h   cudadrv.Graph

	resource
}

// Capture records the work fn queues on st into a graph instead of
// running it. The driver requires begin and end of a non-relaxed capture
// on one OS thread, so the goroutine is locked to its thread for the
// duration: fn must queue its work from this goroutine. An error from fn
// ends the capture and is returned, joined with any capture error.
func (st *Stream) Capture(mode CaptureMode, fn func(st *Stream) error) (*Graph, error) {
	if st == nil || fn == nil {
		return nil, invalid("capture", "nil stream or function")
	}
	s, err := st.ctx.use("capture")
	if err != nil {
		return nil, err
	}
	h, err := st.handle("capture", st.ctx)
	if err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := s.check("cuStreamBeginCapture", s.d.StreamBeginCapture(st.ctx.h, h, int(mode))); err != nil {
		return nil, err
	}
	ferr := callCaptured(fn, st)
	g, r := s.d.StreamEndCapture(st.ctx.h, h)
	if cerr := s.check("cuStreamEndCapture", r); cerr != nil || ferr != nil {
		if g != nil {
			s.d.GraphDestroy(st.ctx.h, g)
		}
		return nil, errors.Join(ferr, cerr)
	}
	if g == nil {
		return nil, fmt.Errorf("cuda: capture: the capture was invalidated: %w",
			&Error{Op: "cuStreamEndCapture", Code: Result(cudadrv.ErrStreamCaptureInvalidated)})
	}
	st.ctx.addChild()
	gr := &Graph{ctx: st.ctx, h: g}
	return track(gr, &gr.leak), nil
}

// callCaptured runs fn and turns a panic into an error, so that the
// capture is always ended and the stream left usable.
func callCaptured(fn func(*Stream) error, st *Stream) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("cuda: capture: function panicked: %v", p)
		}
	}()
	return fn(st)
}

// Instantiate makes an executable graph.
func (g *Graph) Instantiate() (*GraphExec, error) {
	if g == nil {
		return nil, invalid("instantiate", "nil graph")
	}
	s, err := g.ctx.use("instantiate")
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, closedErr("instantiate")
	}
	e, r := s.d.GraphInstantiate(g.ctx.h, g.h)
	if err := s.check("cuGraphInstantiateWithFlags", r); err != nil {
		return nil, err
	}
	g.ctx.addChild()
	ge := &GraphExec{ctx: g.ctx, h: e}
	return track(ge, &ge.leak), nil
}

// Close destroys the graph (instantiated copies stay valid).
func (g *Graph) Close() error {
	if g == nil {
		return nil
	}
	return g.release(g.ctx, func() error {
		return g.ctx.s.check("cuGraphDestroy", g.ctx.s.d.GraphDestroy(g.ctx.h, g.h))
	})
}

// GraphExec is an instantiated graph: replay it with Launch as often as
// needed. One GraphExec must not run concurrently with itself.
type GraphExec struct {
	ctx *Context
	h   cudadrv.GraphExec

	resource
}

// Launch queues one replay of the graph on st.
func (e *GraphExec) Launch(st *Stream) error {
	if e == nil {
		return invalid("graph launch", "nil graph")
	}
	s, err := e.ctx.use("graph launch")
	if err != nil {
		return err
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return closedErr("graph launch")
	}
	h, err := st.handle("graph launch", e.ctx)
	if err != nil {
		return err
	}
	return s.check("cuGraphLaunch", s.d.GraphLaunch(e.ctx.h, e.h, h))
}

// Close destroys the executable graph.
func (e *GraphExec) Close() error {
	if e == nil {
		return nil
	}
	return e.release(e.ctx, func() error {
		return e.ctx.s.check("cuGraphExecDestroy", e.ctx.s.d.GraphExecDestroy(e.ctx.h, e.h))
	})
}
