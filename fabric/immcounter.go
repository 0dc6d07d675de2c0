package fabric

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
)

// Immediate counters. One map per engine, from immediate value to counter,
// read lock-free by every worker (copy-on-write; registrations are rare) and
// updated on each incoming write-with-immediate. Three kinds:
//
//	expected  count to N, fire a callback, reset by subtracting N (cyclic)
//	credit    count only; Wait(n) takes n credits, early arrivals kept
//	flag      count; when a Wait(n)'s credits are paid, set a flag
//
// An immediate whose value has no counter goes to the OnImm callbacks or,
// with none installed, is held until a counter for its value is registered.
// A worker reads the map afresh for each immediate (it once reused one
// read for a whole poll pass, and lost immediates whose counters were
// registered meanwhile), so no immediate sent after its counter was
// registered can be missed. An immediate to be held is settled under the
// registration lock (Engine.immMissedLocked, once per worker pass for all
// the pass's misses), since a registration takes what is held: none is
// ever dropped.
//
// A counter's value is one atomic int64, and removal swaps in a sentinel:
// an arrival racing with removal either lands in the final count the
// remover reads or, seeing the sentinel, is settled by immMissedLocked as
// above. No arrival is lost or counted twice.

const immRemoved = math.MinInt64

type immMode uint8

const (
	immExpected immMode = iota + 1
	immCredit
	immFlag
)

type immEntry struct {
	imm      uint32
	mode     immMode
	v        atomic.Int64
	expected int64
	fn       func() bool // expected: the callback; true keeps counting
	flag     Flag
	waiting  atomic.Int32
	wake     chan struct{}
	closed   *atomic.Bool // the engine's: waits end with ErrClosed
	eng      *Engine
	// lost is set while a peer the counter is bound to (Watch) is lost:
	// waits end with it.
	lost atomic.Pointer[PeerError]
}

// arrive counts one immediate. counted is false when the entry was
// removed; reached reports an expected count reached (already reset).
func (c *immEntry) arrive() (reached, counted bool) { return c.arriveN(1) }

// arriveN counts n immediates at once (n >= 1).
func (c *immEntry) arriveN(n int64) (reached, counted bool) {
	for {
		o := c.v.Load()
		if o == immRemoved {
			return false, false
		}
		v := o + n
		switch c.mode {
		case immExpected:
			// A value already at or past expected (held arrivals) has a
			// reached event pending; the dispatcher takes the backlog.
			if o < c.expected && v >= c.expected {
				if c.v.CompareAndSwap(o, v-c.expected) {
					return true, true
				}
				continue
			}
		case immFlag:
			if o < 0 && v >= 0 {
				if c.v.CompareAndSwap(o, v) {
					c.flag.Set()
					return false, true
				}
				continue
			}
		}
		if c.v.CompareAndSwap(o, v) {
			if c.mode == immCredit && v >= 0 && c.waiting.Load() > 0 {
				c.signal()
			}
			return false, true
		}
	}
}

// takeBacklog takes one more full count from an expected counter whose
// value is still at or past expected, for the dispatcher to fire again.
func (c *immEntry) takeBacklog() bool {
	for {
		o := c.v.Load()
		if o == immRemoved || o < c.expected {
			return false
		}
		if c.v.CompareAndSwap(o, o-c.expected) {
			return true
		}
	}
}

func (c *immEntry) isClosed() bool { return c.closed != nil && c.closed.Load() }

func (c *immEntry) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// take subtracts n credits and returns the value before, or false when
// the entry was removed.
func (c *immEntry) take(n int64) (int64, bool) {
	for {
		o := c.v.Load()
		if o == immRemoved {
			return 0, false
		}
		if c.v.CompareAndSwap(o, o-n) {
			return o, true
		}
	}
}

// remove retires the entry and returns its final count.
func (c *immEntry) remove() (int64, bool) {
	o := c.v.Swap(immRemoved)
	if o == immRemoved {
		return 0, false
	}
	c.signal()
	return o, true
}

// ImmCounter counts arrivals of one immediate value, credit style. Safe
// for concurrent use; Wait is meant for one waiter at a time.
type ImmCounter struct{ e *immEntry }

// Count returns arrivals minus credits taken (negative while a Wait is
// short of arrivals).
func (c *ImmCounter) Count() int64 {
	v := c.e.v.Load()
	if v == immRemoved {
		return 0
	}
	return v
}

// Wait takes n credits, returning once n immediates have arrived in total
// since the credits last taken, including ones that arrived before Wait
// was called. If ctx ends first the credits are given back (nothing is
// lost) and ctx's error, wrapping ErrTimeout on deadline, is returned. A
// removed counter fails waits with ErrRemoved, a closed engine with
// ErrClosed (credits given back). n must not be negative.
func (c *ImmCounter) Wait(ctx context.Context, n int64) error {
	if n < 0 {
		return fmt.Errorf("imm counter %#x: wait for %d: %w", c.e.imm, n, ErrInvalidArgument)
	}
	if n == 0 {
		return nil
	}
	e := c.e
	if e.isClosed() {
		return ErrClosed
	}
	if pe := e.lost.Load(); pe != nil {
		return pe
	}
	old, ok := e.take(n)
	if !ok {
		return ErrRemoved
	}
	if old >= n {
		return nil
	}
	var b backoff
	for i := 0; ; i++ {
		v := e.v.Load()
		if v == immRemoved {
			return ErrRemoved
		}
		if v >= 0 {
			return nil
		}
		if i < backoffSpins {
			continue
		}
		pe := e.lost.Load()
		if err := ctx.Err(); err != nil || e.isClosed() || pe != nil {
			if _, ok := e.take(-n); !ok {
				return ErrRemoved
			}
			if err != nil {
				return ctxErr(ctx)
			}
			if pe != nil {
				return pe
			}
			return ErrClosed
		}
		if i < backoffSpins+backoffYields {
			_ = b.wait(ctx)
			continue
		}
		// Sleep until an arrival brings the value back to >= 0.
		e.waiting.Add(1)
		if v := e.v.Load(); v >= 0 || v == immRemoved || e.lost.Load() != nil {
			e.waiting.Add(-1)
			continue
		}
		select {
		case <-e.wake:
		case <-ctx.Done():
		}
		e.waiting.Add(-1)
	}
}

// Flag is set when a FlagCounter's credits are paid. HostFlag is the host
// memory flag; fabric/gpu.Flag is one a GPU kernel can spin on.
type Flag interface {
	Set()
}

// HostFlag is a flag in host memory. Safe for concurrent use.
type HostFlag struct{ v atomic.Uint32 }

// Set raises the flag.
func (f *HostFlag) Set() { f.v.Store(1) }

// IsSet reports whether the flag is raised.
func (f *HostFlag) IsSet() bool { return f.v.Load() != 0 }

// Clear lowers the flag.
func (f *HostFlag) Clear() { f.v.Store(0) }

// Wait blocks until the flag is raised, then lowers it.
func (f *HostFlag) Wait(ctx context.Context) error {
	var b backoff
	for !f.v.CompareAndSwap(1, 0) {
		if err := b.wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// FlagCounter raises a Flag once the immediates a Wait asked for have
// arrived, so a GPU kernel (or any thread) can spin on the flag without a
// callback. Surplus arrivals carry over to the next Wait.
type FlagCounter struct{ e *immEntry }

// Wait arms the flag for n more immediates; it never blocks. If they have
// already arrived the flag is raised at once. n must be positive.
func (c *FlagCounter) Wait(n int64) error {
	if n <= 0 {
		return fmt.Errorf("flag counter %#x: arm for %d: %w", c.e.imm, n, ErrInvalidArgument)
	}
	old, ok := c.e.take(n)
	if !ok {
		return ErrRemoved
	}
	if old >= n {
		c.e.flag.Set()
	}
	return nil
}

// Count returns arrivals minus credits armed.
func (c *FlagCounter) Count() int64 { return (&ImmCounter{c.e}).Count() }
