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
// A backend may keep reading DispatchSend's input until DispatchRecv
// returns, and CombineSend's until CombineRecv returns (the host backend
// copies rows that stay on their rank straight from there).
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
// SetActiveRanks moves from idle, broken or joining (a backend built to
// join a running world) to idle, or to broken when it fails.
type state uint8

const (
	stIdle state = iota
	stDispatchSent
	stDispatched
	stCombineSent
	stBroken
	stClosed
	stJoining
)

var stateNames = [...]string{"combine recv (or start)", "dispatch send", "dispatch recv", "combine send", "failure",
	"close", "start of a joining rank"}
var nextCall = [...]string{"DispatchSend", "DispatchRecv", "CombineSend", "CombineRecv",
	"SetActiveRanks or Close", "nothing", "SetActiveRanks"}

// Context runs expert-parallel dispatch and combine for one rank. Each
// iteration is exactly DispatchSend, DispatchRecv, CombineSend, CombineRecv
// (Dispatch and Combine run both halves); other work may run between the
// calls, which is the point of splitting them. A call out of that order
// returns an error wrapping ErrCallOrder and changes nothing, so misuse
// never deadlocks the peers. A bad argument returns ErrInvalidArgument, also
// changing nothing. A backend failure or timeout breaks the context: later
// calls return ErrBroken (wrapping the cause) until the members
// resynchronise with SetActiveRanks (after a lost or silent rank, without
// it), or the context is closed and rebuilt on every rank.
//
// A Context is not meant for concurrent use: a call made while another
// runs returns ErrBusy. Close waits for a running call to return (every
// backend wait is bounded by its ctx).
//
// A broken context whose cause is a lost or silent rank can carry on
// without it: see SetActiveRanks.
type Context struct {
	mu     sync.Mutex // held for the whole of a call
	st     state
	cause  error
	l      *Layout
	p      *Planner
	b      Backend
	tokens int    // m of the current iteration
	gen    uint32 // membership generation
}

// New builds a Context over backend b. The Context owns b from here on: it
// is closed by Context.Close, and by New itself when cfg is invalid. It
// starts in generation 0 with every rank active, unless b was built to
// join a running world (MembershipBackend.Joining): then its first call
// must be SetActiveRanks.
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
	c := &Context{p: p, l: p.Layout(), b: b}
	if mb, ok := b.(MembershipBackend); ok && mb.Joining() {
		c.st = stJoining
	}
	return c, nil
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

// DispatchSend plans this rank's copies and starts sending them. The
// backend may read in until DispatchRecv returns: leave its arrays
// unchanged until then.
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
// into out, with what the dispatch dropped (DispatchOutput.Dropped).
func (c *Context) DispatchRecv(ctx context.Context, out *DispatchOutput) error {
	if err := c.begin("DispatchRecv", stDispatchSent); err != nil {
		return err
	}
	if err := out.check(c.l); err != nil {
		c.mu.Unlock()
		return err
	}
	if err := c.b.DispatchRecv(ctx, c.p, out); err != nil {
		return c.end(err, stDispatched)
	}
	c.reportDropped(out)
	return c.end(nil, stDispatched)
}

// reportDropped fills out's drop report from the send plan.
func (c *Context) reportDropped(out *DispatchOutput) {
	sp := c.p.Send()
	out.Dropped = sp.Dropped
	if out.DroppedExperts == nil {
		return
	}
	clear(out.DroppedExperts[:c.l.Experts])
	for _, d := range c.p.dropped {
		for e := d[0]; e < d[1]; e++ {
			out.DroppedExperts[e] = int32(sp.Counts[e])
		}
	}
}

// CombineSend sends the expert outputs back to their tokens' ranks. The
// backend may read in until CombineRecv returns: leave its rows unchanged
// until then.
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

// Generation returns the membership generation the context runs in.
func (c *Context) Generation() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// SetActiveRanks changes the ranks that take part in the iterations, from
// the next one on. It is collective among the members of m (the active
// ranks): each calls it with the same m, between iterations (idle), or
// after a failure broke its context, or first thing on a rank built to
// join; the inactive ranks do not call it. The backend must be a
// MembershipBackend (both of ferry's are).
//
// From then on, the rows this rank's tokens route to the experts of an
// inactive rank are dropped at dispatch (the count is reported in
// DispatchOutput.Dropped and per expert in DispatchOutput.DroppedExperts),
// and combine adds nothing for them, as if their weights were zero: a
// token whose K experts are all inactive combines to zero, or to what its
// output held with Accumulate. A group with no active replica sends
// nothing. No wait of any later call is for an inactive rank.
//
// Rules:
//   - Every member passes the same Membership; nothing checks that they
//     agree (a disagreement usually ends in a join that times out), so
//     the mask and the generation come from one place (the control plane
//     that saw the rank lost).
//   - It is the only way to change the active ranks, and so the only way
//     back in for a rank that was masked out. A masked-out rank must not
//     keep iterating on its own: stop it, close its context, or bring it
//     back with the others through this call.
//   - m.Generation must exceed the context's, and fall in another bank
//     (Generation mod ImmBanks): immediates of the generation given up
//     carry that bank's values, so stragglers are never counted.
//   - A restarted process comes back through a backend built to join
//     (host.Options.Join, for instance), which exchanged nothing at New,
//     and a Context over it: its first call is this one, and every member
//     passes an Exchange so that all learn its new descriptors. On the
//     host backend (a2a/host) with a node memory that can reshare
//     (host.NodeRejoiner: LocalNode, ProcessNode), its node peers that
//     stayed active map its new buffers in place of the dead ones, and it
//     maps theirs, within this call; a member that was inactive when a
//     node peer of its restarted also needs an Exchange when it comes
//     back, so that it maps the new buffers. The CUDA backend (a2a/cudabackend) maps
//     node peers' buffers once, at New: there a restarted rank can only
//     come back when no rank of its domain stayed active (its whole
//     domain restarts with it).
//   - A failure on the way (a member that does not come, the context's
//     deadline) leaves the context broken: retry with a newer generation,
//     or close it.
func (c *Context) SetActiveRanks(ctx context.Context, m Membership) error {
	const call = "SetActiveRanks"
	if !c.mu.TryLock() {
		return fmt.Errorf("a2a %s: %w", call, ErrBusy)
	}
	switch c.st {
	case stIdle, stBroken, stJoining:
	case stClosed:
		c.mu.Unlock()
		return fmt.Errorf("a2a %s: %w", call, ErrClosed)
	default:
		err := &OrderError{Call: call, State: stateNames[c.st], Want: nextCall[c.st]}
		c.mu.Unlock()
		return err
	}
	mb, ok := c.b.(MembershipBackend)
	if !ok {
		c.mu.Unlock()
		return fmt.Errorf("a2a %s: the backend cannot run without some ranks: %w", call, ErrNotSupported)
	}
	if m.Generation <= c.gen || m.Generation%ImmBanks == c.gen%ImmBanks {
		c.mu.Unlock()
		return argErr("set active ranks", "Generation", "%d after %d: must be larger, in another bank (mod %d)",
			m.Generation, c.gen, ImmBanks)
	}
	if c.st == stJoining && m.Exchange == nil {
		c.mu.Unlock()
		return argErr("set active ranks", "Exchange", "a joining rank needs the members' descriptors")
	}
	if err := c.l.CheckActive(m.Active); err != nil {
		c.mu.Unlock()
		return err
	}
	if err := mb.Quiesce(ctx); err != nil {
		return c.end(fmt.Errorf("a2a generation %d: %w", m.Generation, err), stIdle)
	}
	if err := c.p.SetActive(m.Active); err != nil {
		return c.end(err, stIdle) // checked above: cannot happen
	}
	if err := mb.SetActive(ctx, c.p, &m); err != nil {
		return c.end(fmt.Errorf("a2a generation %d: %w", m.Generation, err), stIdle)
	}
	c.gen = m.Generation
	c.cause = nil
	return c.end(nil, stIdle)
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
