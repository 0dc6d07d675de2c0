package fabric

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Immediate leases. Hand-picked immediate values are shared: a cancelled
// request's late writes feed whoever counts the value next. A lease is a
// value (or a run of values) the engine hands out for one request and takes
// back with Retire; the values of a retired lease are never credited to a
// later lease, because a later lease of the same slots carries another
// generation in its values.
//
// The lease range is [LeaseBase, 2^32): value = LeaseBase | gen<<16 | slot.
// 65536 slots, each with a 14-bit generation that steps on every lease of
// it; slots are handed out next-fit, so a value comes back only after about
// 2^30 leases. Values below LeaseBase stay the user's to pick by hand.
//
// What arrives for a lease-range value:
//   - a counter registered for it counts it (the lease is live: Retire
//     removes the counters of its values);
//   - else, while the lease is live, it is held for the lease's next
//     counter (never handed to OnImm callbacks);
//   - else (retired, or never leased) it is dropped and counted in
//     Stats.ImmsDropped.

const (
	// LeaseBase is the first immediate value of the lease range. Values
	// from LeaseBase up belong to Engine.LeaseImms: counters for them can
	// be registered only while they are leased, and immediates arriving
	// for them while they are not are dropped (Stats.ImmsDropped). A
	// lease value is LeaseBase | gen<<16 | slot: 65536 slots, each with a
	// 14-bit generation that steps on every lease of it.
	LeaseBase uint32 = 0xC000_0000
	// MaxLeaseImms is the most values one lease may hold.
	MaxLeaseImms = 4096

	leaseSlotBits = 16
	leaseSlots    = 1 << leaseSlotBits
	leaseSlotMask = leaseSlots - 1
	leaseGenBits  = 14
	leaseGenMask  = 1<<leaseGenBits - 1
)

// leaseTable is the engine's lease state. slots[i] holds gen<<1 of slot
// i's current (or last) lease, with bit 0 set while leased: workers read it
// without a lock; mu orders leasing and retiring.
type leaseTable struct {
	mu     sync.Mutex
	slots  atomic.Pointer[[leaseSlots]atomic.Uint32]
	cursor int
	live   int
}

// leaseValue builds the value of slot at generation gen.
func leaseValue(slot int, gen uint32) uint32 {
	return LeaseBase | gen<<leaseSlotBits | uint32(slot)
}

// leased reports whether imm (a lease-range value) is leased now.
func (t *leaseTable) leased(imm uint32) bool {
	s := t.slots.Load()
	if s == nil {
		return false
	}
	gen := imm >> leaseSlotBits & leaseGenMask
	return s[imm&leaseSlotMask].Load() == gen<<1|1
}

// Lease is a run of immediate values leased from an engine for one request
// (Engine.LeaseImms), plus one value of its own for the request's
// notification (see Mailbox). Safe for concurrent use.
type Lease struct {
	e    *Engine
	slot int
	n    int
	gen  uint32
	mu   sync.Mutex
	gone bool
	done chan struct{} // closed by Retire
	box  int           // mailbox slot + 1; 0 while none
	q    *noticeQueue  // notifications read and not yet taken
}

// LeaseImms leases n consecutive immediate values (1 to MaxLeaseImms) for
// one request: First() to First()+n-1. Counters for them are registered as for
// any value (ExpectImm, ImmCounter, FlagCounter); immediates that arrive
// before a counter are held for it as usual. Retire ends the lease: its
// counters are removed, what was held for it is dropped, and immediates
// that arrive for its values afterwards are dropped and counted in
// Stats.ImmsDropped, so a cancelled request's late writes never feed the
// next lease of the same slots (its values differ). It fails with
// ErrLeasesExhausted when no run of n+1 free slots is left.
func (e *Engine) LeaseImms(n int) (*Lease, error) {
	if e == nil {
		return nil, errNilEngine
	}
	if n < 1 || n > MaxLeaseImms {
		return nil, fmt.Errorf("lease imms: %d values (1 to %d): %w", n, MaxLeaseImms, ErrInvalidArgument)
	}
	if e.life.closed.Load() {
		return nil, ErrClosed
	}
	t := &e.leases
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slots.Load()
	if s == nil {
		s = new([leaseSlots]atomic.Uint32)
		t.slots.Store(s)
	}
	// Next-fit over the slots for n+1 free ones in a row (the last is the
	// notification's).
	need := n + 1
	start, run := -1, 0
	for i := 0; i < leaseSlots+need && run < need; i++ {
		j := (t.cursor + i) % leaseSlots
		if j == 0 {
			run = 0 // runs do not wrap around
		}
		if s[j].Load()&1 != 0 {
			run = 0
			continue
		}
		if run == 0 {
			start = j
		}
		run++
	}
	if run < need {
		return nil, fmt.Errorf("lease imms: %d values with %d leases live: %w", n, t.live, ErrLeasesExhausted)
	}
	// One generation for the whole run, newer than each slot's last, so
	// value i is First()+i and no value of an earlier lease comes back.
	var gen uint32
	for j := start; j < start+need; j++ {
		gen = max(gen, s[j].Load()>>1)
	}
	gen = (gen + 1) & leaseGenMask
	for j := start; j < start+need; j++ {
		s[j].Store(gen<<1 | 1)
	}
	t.cursor = (start + need) % leaseSlots
	t.live++
	return &Lease{e: e, slot: start, n: n, gen: gen, done: make(chan struct{})}, nil
}

// Len returns how many values the lease holds for writes.
func (l *Lease) Len() int { return l.n }

// First returns the lease's first value: its values are First() to
// First()+Len()-1, consecutive.
func (l *Lease) First() uint32 { return leaseValue(l.slot, l.gen) }

// notifyValue is the lease's own value, the one notifications carry.
func (l *Lease) notifyValue() uint32 { return leaseValue(l.slot+l.n, l.gen) }

// Retired reports whether Retire was called.
func (l *Lease) Retired() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gone
}

// Retire ends the lease (see LeaseImms): counters registered for its
// values are removed (their waits end with ErrRemoved), immediates held
// for them are dropped and counted, its mailbox is given back, and waits
// for its notification end with ErrNotLeased. Calling it again does
// nothing.
func (l *Lease) Retire() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone {
		return nil
	}
	l.gone = true
	close(l.done)
	e := l.e
	// Mark the slots free first, under the immediate lock: a worker then
	// settles each later arrival as dropped, and one that found the lease
	// live settles under the same lock after this.
	e.imms.mu.Lock()
	s := e.leases.slots.Load()
	for j := l.slot; j <= l.slot+l.n; j++ {
		s[j].Store(l.gen << 1)
	}
	old := *e.imms.counters.Load()
	var m map[uint32]*immEntry
	var removed []*immEntry
	for i := 0; i <= l.n; i++ {
		v := leaseValue(l.slot+i, l.gen)
		if n := e.imms.held[v]; n > 0 {
			delete(e.imms.held, v)
			e.unclaimed.Add(^uint64(n - 1))
			e.immsDropped.Add(uint64(n))
		}
		if ent, ok := old[v]; ok {
			if m == nil {
				m = make(map[uint32]*immEntry, len(old))
				for k, x := range old {
					m[k] = x
				}
			}
			delete(m, v)
			removed = append(removed, ent)
		}
	}
	if m != nil {
		e.imms.counters.Store(&m)
	}
	e.imms.mu.Unlock()
	for _, ent := range removed {
		ent.remove()
	}
	if l.box != 0 {
		// Notices still queued stay takeable, but no longer free slots
		// of a mailbox a later lease may be given.
		l.q.detach()
		e.notes.freeBox(l.box - 1)
		l.box = 0
	}
	e.leases.mu.Lock()
	e.leases.live--
	e.leases.mu.Unlock()
	return nil
}

// checkLeased refuses a counter for a lease-range value that is not leased
// now: such a value is either a retired lease's (whose immediates are
// dropped) or picked by hand from the range leases own.
func (e *Engine) checkLeased(op string, imm uint32) error {
	if imm >= LeaseBase && !e.leases.leased(imm) {
		return fmt.Errorf("%s %#x: %w", op, imm, ErrNotLeased)
	}
	return nil
}

// WaitNotification returns the next notification sent to the lease's
// mailbox (see Mailbox), waiting for it until ctx ends (ctx's error,
// wrapping ErrTimeout on deadline), the lease is retired (ErrNotLeased) or
// the engine closes (ErrClosed). Notifications already delivered are
// returned first, in the order their sender sent them (up to
// MaxQueuedNotices wait). Where notifications were lost (see
// Notification), it returns a *NotificationsLostError (wrapping
// ErrNotificationsLost) once, in their place, and the next call goes on
// with those after them.
func (l *Lease) WaitNotification(ctx context.Context) (Notice, error) {
	l.mu.Lock()
	q := l.q
	l.mu.Unlock()
	if q == nil {
		return Notice{}, fmt.Errorf("wait notification: lease %#x has no mailbox: %w", l.First(), ErrInvalidArgument)
	}
	for {
		n, lost, ok := q.take()
		if lost > 0 {
			return Notice{}, &NotificationsLostError{Lease: l.First(), Lost: lost}
		}
		if ok {
			return n, nil
		}
		select {
		case <-q.wake:
		case <-l.done:
			if n, lost, ok := q.take(); ok || lost > 0 {
				if lost > 0 {
					return Notice{}, &NotificationsLostError{Lease: l.First(), Lost: lost}
				}
				return n, nil
			}
			return Notice{}, fmt.Errorf("wait notification: lease %#x: %w", l.First(), ErrNotLeased)
		case <-l.e.life.closing:
			return Notice{}, ErrClosed
		case <-ctx.Done():
			return Notice{}, ctxErr(ctx)
		}
	}
}
