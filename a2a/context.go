package a2a

import (
	"context"
	"fmt"
	"sync"
)

// Backend moves the rows of one rank. A Context calls it in the fixed order
// DispatchSend, DispatchRecv, CombineSend, CombineRecv, one call at a time,
// with arguments already validated, and calls PlanSend on the planner
// before DispatchSend. The backend runs the count exchange, calls PlanRecv
// with the full count table, moves rows along the planned paths and waits
// for the planned immediate counts.
//
// Every wait must end when ctx ends, returning an error that wraps
// ErrTimeout. Any error leaves the protocol in an unknown state: the
// Context then refuses further calls, and only Close is made. Close must
// release everything the backend holds and be idempotent.
type Backend interface {
	DispatchSend(ctx context.Context, p *Planner, in *DispatchInput) error
	DispatchRecv(ctx context.Context, p *Planner, out *DispatchOutput) error
	CombineSend(ctx context.Context, p *Planner, in *CombineInput) error
	CombineRecv(ctx context.Context, p *Planner, out *CombineOutput) error
	Close() error
}

// state is where a Context is in its per-iteration cycle:
//
//	idle --DispatchSend--> dispatchSent --DispatchRecv--> dispatched
//	  ^                                                      |
//	  +--CombineRecv-- combineSent <--------CombineSend------+
//
// Any backend error moves to broken; Close moves to closed from anywhere.
type state uint8

const (
	stIdle state = iota
	stDispatchSent
	stDispatched
	stCombineSent
	stBroken
	stClosed
)

var stateNames = [...]string{"combine recv (or start)", "dispatch send", "dispatch recv", "combine send", "failure", "close"}
var nextCall = [...]string{"DispatchSend", "DispatchRecv", "CombineSend", "CombineRecv", "Close", "nothing"}

// Context runs expert-parallel dispatch and combine for one rank. Each
// iteration is exactly DispatchSend, DispatchRecv, CombineSend, CombineRecv
// (Dispatch and Combine run both halves); other work may run between the
// calls, which is the point of splitting them. A call out of that order
// returns an error wrapping ErrCallOrder and changes nothing, so misuse
// never deadlocks the peers. A bad argument returns ErrInvalidArgument, also
// changing nothing. A backend failure or timeout breaks the context: later
// calls return ErrBroken (wrapping the cause) and the context must be
// closed and rebuilt on every rank.
//
// A Context is not meant for concurrent use: a call made while another
// runs returns ErrBusy. Close waits for a running call to return (every
// backend wait is bounded by its ctx).
type Context struct {
	mu     sync.Mutex // held for the whole of a call
	st     state
	cause  error
	l      *Layout
	p      *Planner
	b      Backend
	tokens int // m of the current iteration
}

// New builds a Context over backend b. The Context owns b from here on: it
// is closed by Context.Close, and by New itself when cfg is invalid.
func New(cfg Config, b Backend) (*Context, error) {
	p, err := NewPlanner(cfg)
	if err != nil {
		if b != nil {
			_ = b.Close()
		}
		return nil, err
	}
	if b == nil {
		return nil, argErr("new", "backend", "nil")
	}
	return &Context{p: p, l: p.Layout(), b: b}, nil
}

// Layout returns the validated layout: sizes of every buffer and output.
func (c *Context) Layout() *Layout { return c.l }

// begin locks c for call, which is legal in state want.
func (c *Context) begin(call string, want state) error {
	if !c.mu.TryLock() {
		return fmt.Errorf("a2a %s: %w", call, ErrBusy)
	}
	switch c.st {
	case want:
		return nil
	case stClosed:
		c.mu.Unlock()
		return fmt.Errorf("a2a %s: %w", call, ErrClosed)
	case stBroken:
		c.mu.Unlock()
		return fmt.Errorf("a2a %s: %w: %w", call, ErrBroken, c.cause)
	}
	err := &OrderError{Call: call, State: stateNames[c.st], Want: nextCall[c.st]}
	c.mu.Unlock()
	return err
}

// end records the outcome of a call that started in a legal state.
func (c *Context) end(err error, next state) error {
	defer c.mu.Unlock()
	if err != nil {
		c.st, c.cause = stBroken, err
		return err
	}
	c.st = next
	return nil
}

// DispatchSend plans this rank's copies and starts sending them.
func (c *Context) DispatchSend(ctx context.Context, in *DispatchInput) error {
	if err := c.begin("DispatchSend", stIdle); err != nil {
		return err
	}
	if err := in.check(c.l); err != nil {
		c.mu.Unlock()
		return err
	}
	if err := c.p.PlanSend(in.Indices, in.Tokens); err != nil {
		c.mu.Unlock()
		return err
	}
	c.tokens = in.Tokens
	return c.end(c.b.DispatchSend(ctx, c.p, in), stDispatchSent)
}

// DispatchRecv waits for this rank's copies and writes them expert-major
// into out.
func (c *Context) DispatchRecv(ctx context.Context, out *DispatchOutput) error {
	if err := c.begin("DispatchRecv", stDispatchSent); err != nil {
		return err
	}
	if err := out.check(c.l); err != nil {
		c.mu.Unlock()
		return err
	}
	return c.end(c.b.DispatchRecv(ctx, c.p, out), stDispatched)
}

// CombineSend sends the expert outputs back to their tokens' ranks.
func (c *Context) CombineSend(ctx context.Context, in *CombineInput) error {
	if err := c.begin("CombineSend", stDispatched); err != nil {
		return err
	}
	if err := in.check(c.l); err != nil {
		c.mu.Unlock()
		return err
	}
	return c.end(c.b.CombineSend(ctx, c.p, in), stCombineSent)
}

// CombineRecv waits for the expert outputs of this rank's tokens and
// reduces them into out.
func (c *Context) CombineRecv(ctx context.Context, out *CombineOutput) error {
	if err := c.begin("CombineRecv", stCombineSent); err != nil {
		return err
	}
	if err := out.check(c.l, c.tokens); err != nil {
		c.mu.Unlock()
		return err
	}
	return c.end(c.b.CombineRecv(ctx, c.p, out), stIdle)
}

// Dispatch runs DispatchSend then DispatchRecv. Both arguments are checked
// before anything is sent.
func (c *Context) Dispatch(ctx context.Context, in *DispatchInput, out *DispatchOutput) error {
	if err := out.check(c.l); err != nil {
		return err
	}
	if err := c.DispatchSend(ctx, in); err != nil {
		return err
	}
	return c.DispatchRecv(ctx, out)
}

// Combine runs CombineSend then CombineRecv. Both arguments are checked
// before anything is sent.
func (c *Context) Combine(ctx context.Context, in *CombineInput, out *CombineOutput) error {
	if !c.mu.TryLock() {
		return fmt.Errorf("a2a Combine: %w", ErrBusy)
	}
	m := c.tokens
	c.mu.Unlock()
	if err := out.check(c.l, m); err != nil {
		return err
	}
	if err := c.CombineSend(ctx, in); err != nil {
		return err
	}
	return c.CombineRecv(ctx, out)
}

// Close releases the backend. It is idempotent; after it every call
// returns ErrClosed.
func (c *Context) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st == stClosed {
		return nil
	}
	c.st = stClosed
	return c.b.Close()
}
