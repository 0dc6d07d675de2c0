package cuda

import (
	"context"
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/internal/cudadrv"
)

// Stream is a CUDA stream. A nil *Stream stands for the legacy default
// stream wherever a stream is taken. Streams are safe for concurrent use
// (the driver orders work in submission order).
type Stream struct {
	ctx *Context
	h   cudadrv.Stream

	resource
}

// NewStream creates a stream. nonBlocking streams do not synchronise with
// the legacy default stream.
func (c *Context) NewStream(nonBlocking bool) (*Stream, error) {
	s, err := c.use("new stream")
	if err != nil {
		return nil, err
	}
	var flags uint32
	if nonBlocking {
		flags = cudadrv.StreamNonBlocking
	}
	h, r := s.d.StreamCreate(c.h, flags)
	if err := s.check("cuStreamCreate", r); err != nil {
		return nil, err
	}
	c.addChild()
	st := &Stream{ctx: c, h: h}
	return track(st, &st.leak), nil
}

// handle returns the raw stream for a call in ctx c (nil: default stream).
func (st *Stream) handle(op string, c *Context) (cudadrv.Stream, error) {
	if st == nil {
		return nil, nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return nil, closedErr(op)
	}
	if st.ctx.h != c.h {
		return nil, invalid(op, "stream belongs to %s, not %s", st.ctx.dev, c.dev)
	}
	return st.h, nil
}

// Context returns the stream's context.
func (st *Stream) Context() *Context { return st.ctx }

// Synchronize blocks until all work on the stream is done.
func (st *Stream) Synchronize() error {
	if st == nil {
		return invalid("stream synchronize", "nil stream")
	}
	s, err := st.ctx.use("stream synchronize")
	if err != nil {
		return err
	}
	h, err := st.handle("stream synchronize", st.ctx)
	if err != nil {
		return err
	}
	return s.check("cuStreamSynchronize", s.d.StreamSynchronize(st.ctx.h, h))
}

// SynchronizeContext waits for the stream like Synchronize, but polls so
// that it can return when ctx ends (the error wraps ErrTimeout); the work
// itself keeps running.
func (st *Stream) SynchronizeContext(ctx context.Context) error {
	if st == nil {
		return invalid("stream synchronize", "nil stream")
	}
	return pollUntil(ctx, "stream synchronize", st.Query)
}

// Query reports whether all work on the stream is done.
func (st *Stream) Query() (bool, error) {
	if st == nil {
		return false, invalid("stream query", "nil stream")
	}
	s, err := st.ctx.use("stream query")
	if err != nil {
		return false, err
	}
	h, err := st.handle("stream query", st.ctx)
	if err != nil {
		return false, err
	}
	r := s.d.StreamQuery(st.ctx.h, h)
	if r == cudadrv.ErrNotReady {
		return false, nil
	}
	return r == cudadrv.Success, s.check("cuStreamQuery", r)
}

// CopyAsync queues a copy of n bytes between device or pinned host
// addresses (never Go memory: the copy runs after the call returns).
func (st *Stream) CopyAsync(dst, src DevicePtr, n uint64) error {
	c := st.ctxOr(nil)
	if c == nil {
		return invalid("copy async", "nil stream")
	}
	s, err := c.use("copy async")
	if err != nil {
		return err
	}
	h, err := st.handle("copy async", c)
	if err != nil || n == 0 {
		return err
	}
	return s.check("cuMemcpyAsync", s.d.MemcpyAsync(c.h, cudadrv.DevicePtr(dst), cudadrv.DevicePtr(src), n, h))
}

// MemsetAsync queues setting n bytes at dst to v.
func (st *Stream) MemsetAsync(dst DevicePtr, v byte, n uint64) error {
	c := st.ctxOr(nil)
	if c == nil {
		return invalid("memset async", "nil stream")
	}
	s, err := c.use("memset async")
	if err != nil {
		return err
	}
	h, err := st.handle("memset async", c)
	if err != nil || n == 0 {
		return err
	}
	return s.check("cuMemsetD8Async", s.d.MemsetD8Async(c.h, cudadrv.DevicePtr(dst), v, n, h))
}

func (st *Stream) ctxOr(c *Context) *Context {
	if st == nil {
		return c
	}
	return st.ctx
}

// Close destroys the stream (queued work still completes). Closing twice
// is a no-op.
func (st *Stream) Close() error {
	if st == nil {
		return nil
	}
	return st.release(st.ctx, func() error {
		return st.ctx.s.check("cuStreamDestroy", st.ctx.s.d.StreamDestroy(st.ctx.h, st.h))
	})
}

// pollUntil calls done until it reports true, fails, or ctx ends. It spins
// briefly (GPU work is often microseconds), then sleeps with a growing
// pause capped at 1 ms, so a long wait costs little CPU on small hosts.
func pollUntil(ctx context.Context, op string, done func() (bool, error)) error {
	pause := time.Microsecond
	for i := 0; ; i++ {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cuda: %s: %w (%w)", op, ErrTimeout, err)
		}
		if i < 64 {
			continue
		}
		time.Sleep(pause)
		if pause < time.Millisecond {
			pause *= 2
		}
	}
}

// Event is a CUDA event: a marker in a stream, for waiting and timing.
type Event struct {
	ctx *Context
	h   cudadrv.Event

	resource
}

// NewEvent creates an event. timing=false makes a lighter event that
// Elapsed cannot use.
func (c *Context) NewEvent(timing bool) (*Event, error) {
	s, err := c.use("new event")
	if err != nil {
		return nil, err
	}
	flags := uint32(cudadrv.EventDefault)
	if !timing {
		flags = cudadrv.EventDisableTiming
	}
	h, r := s.d.EventCreate(c.h, flags)
	if err := s.check("cuEventCreate", r); err != nil {
		return nil, err
	}
	c.addChild()
	e := &Event{ctx: c, h: h}
	return track(e, &e.leak), nil
}

func (e *Event) use(op string) (*driverState, error) {
	if e == nil {
		return nil, invalid(op, "nil event")
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, closedErr(op)
	}
	return e.ctx.use(op)
}

// Record marks the current end of st's work.
func (e *Event) Record(st *Stream) error {
	s, err := e.use("event record")
	if err != nil {
		return err
	}
	h, err := st.handle("event record", e.ctx)
	if err != nil {
		return err
	}
	return s.check("cuEventRecord", s.d.EventRecord(e.ctx.h, e.h, h))
}

// Query reports whether the work before the last Record is done.
func (e *Event) Query() (bool, error) {
	s, err := e.use("event query")
	if err != nil {
		return false, err
	}
	r := s.d.EventQuery(e.ctx.h, e.h)
	if r == cudadrv.ErrNotReady {
		return false, nil
	}
	return r == cudadrv.Success, s.check("cuEventQuery", r)
}

// Wait polls until the event completed or ctx ends (ErrTimeout).
func (e *Event) Wait(ctx context.Context) error { return pollUntil(ctx, "event wait", e.Query) }

// Elapsed returns the time between two completed timing events.
func Elapsed(start, end *Event) (time.Duration, error) {
	s, err := start.use("event elapsed")
	if err != nil {
		return 0, err
	}
	if _, err := end.use("event elapsed"); err != nil {
		return 0, err
	}
	ms, r := s.d.EventElapsedTime(start.ctx.h, start.h, end.h)
	if err := s.check("cuEventElapsedTime", r); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Close destroys the event. Closing twice is a no-op.
func (e *Event) Close() error {
	if e == nil {
		return nil
	}
	return e.release(e.ctx, func() error {
		return e.ctx.s.check("cuEventDestroy", e.ctx.s.d.EventDestroy(e.ctx.h, e.h))
	})
}
