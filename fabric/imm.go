package fabric

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// OnImm adds fn to the callbacks that receive immediates no counter claims.
// They run on the dispatcher, in the order they were added. While no
// callback is installed, such immediates are held (see ExpectImm).
func (e *Engine) OnImm(fn func(imm uint32)) {
	if e == nil {
		return
	}
	e.imms.mu.Lock()
	defer e.imms.mu.Unlock()
	fns := append(slices.Clone(*e.imms.fns.Load()), fn)
	e.imms.fns.Store(&fns)
}

// PrevCount is what a replaced or removed counter had counted.
type PrevCount struct {
	Count    int64
	Expected uint32 // 0 for credit and flag counters
}

// setEntry installs ent for its immediate, replacing (and retiring) any
// previous counter, whose count is returned. A new counter starts with the
// immediates held for its value.
func (e *Engine) setEntry(imm uint32, ent *immEntry) (PrevCount, bool) {
	e.imms.mu.Lock()
	defer e.imms.mu.Unlock()
	old := *e.imms.counters.Load()
	m := make(map[uint32]*immEntry, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	prev, had := old[imm]
	if ent == nil {
		delete(m, imm)
	} else {
		m[imm] = ent
		if n := e.imms.held[imm]; n > 0 {
			delete(e.imms.held, imm)
			e.unclaimed.Add(^uint64(n - 1))
			e.creditLocked(ent, n)
		}
	}
	e.imms.counters.Store(&m)
	if !had {
		return PrevCount{}, false
	}
	n, _ := prev.remove()
	return PrevCount{Count: n, Expected: uint32(prev.expected)}, true
}

// creditLocked counts n arrivals on ent from outside a worker; a reached
// expected count is handed to the dispatcher. Called with immMu held.
func (e *Engine) creditLocked(ent *immEntry, n int64) bool {
	reached, counted := ent.arriveN(n)
	if reached {
		e.imms.out = append(e.imms.out, dispEvent{kind: dispImmReached, ent: ent})
		e.disp.kick()
	}
	return counted
}

// immMissedFast handles an immediate a worker found no counter for in its
// lock-free read of the counter map, made for this very immediate (so it
// sees every registration completed before the immediate was sent). With
// OnImm callbacks installed (they are never removed) a last lock-free look
// decides: a counter registered since counts it, else the callbacks get
// it. Without callbacks the immediate must be held, and holding has to be
// settled under the lock registrations take (a registration takes what is
// held): settled is false then, and the worker settles it with the other
// misses of its pass (immMissedLocked), in one hold of the lock. It is
// never dropped.
func (e *Engine) immMissedFast(imm uint32) (ent *immEntry, reached, toCallbacks, settled bool) {
	if imm >= LeaseBase {
		// A lease-range value never goes to the callbacks: dropped when
		// not leased (a value comes back leased only 2^14 generations
		// later, so no lock is needed to tell), else held under the lock.
		if !e.leases.leased(imm) {
			e.immsDropped.Add(1)
			return nil, false, false, true
		}
		return nil, false, false, false
	}
	if len(*e.imms.fns.Load()) == 0 {
		return nil, false, false, false
	}
	if ent = (*e.imms.counters.Load())[imm]; ent != nil {
		if r, counted := ent.arrive(); counted {
			return ent, r, false, true
		}
	}
	return nil, false, true, true
}

// immMissedLocked settles n immediates of value imm that missed every
// counter and found no OnImm callback, with immMu held: the map is read
// again under the lock, so they are counted by a counter registered since,
// go to callbacks installed since, or are held for the next counter of
// their value.
func (e *Engine) immMissedLocked(imm uint32, n int64) (ent *immEntry, reached, toCallbacks bool) {
	if ent = (*e.imms.counters.Load())[imm]; ent != nil {
		// Entries in the current map are live: removal swaps the map and
		// retires the entry under this lock.
		if r, counted := ent.arriveN(n); counted {
			return ent, r, false
		}
	}
	if imm >= LeaseBase && !e.leases.leased(imm) {
		e.immsDropped.Add(uint64(n)) // retired under this lock meanwhile
		return nil, false, false
	}
	if imm < LeaseBase && len(*e.imms.fns.Load()) > 0 {
		return nil, false, true // callbacks were installed meanwhile
	}
	e.imms.held[imm] += n
	e.unclaimed.Add(uint64(n))
	return nil, false, false
}

// ExpectImm makes imm a counter that calls fn on the dispatcher each time
// expected immediates have arrived. If fn returns true the counter keeps
// going (it was already reset, so it fires again after another expected
// arrivals); otherwise it is removed and any immediates counted since the
// reset are replayed: to a counter registered for imm since, else to the
// OnImm callbacks, else held. A counter already registered for imm is
// replaced (its count reset to 0) and its state returned.
//
// Immediates that arrived while imm had no counter and no OnImm callback
// was installed were held: the new counter starts with them (and fires at
// once, as many times as they allow, if they reach expected).
func (e *Engine) ExpectImm(imm uint32, expected uint32, fn func() bool) (PrevCount, bool, error) {
	if e == nil {
		return PrevCount{}, false, errNilEngine
	}
	if expected == 0 || fn == nil {
		return PrevCount{}, false, fmt.Errorf("expect imm %#x: expected %d: %w", imm, expected, ErrInvalidArgument)
	}
	if e.life.closed.Load() {
		return PrevCount{}, false, ErrClosed
	}
	if err := e.checkLeased("expect imm", imm); err != nil {
		return PrevCount{}, false, err
	}
	prev, had := e.setEntry(imm, e.newEntry(imm, immExpected, int64(expected), fn, nil))
	return prev, had, nil
}

// RemoveImmCount stops counting imm and returns what its counter had.
func (e *Engine) RemoveImmCount(imm uint32) (PrevCount, bool) {
	if e == nil {
		return PrevCount{}, false
	}
	return e.setEntry(imm, nil)
}

// ImmCounter makes imm a credit counter (replacing any counter for it). It
// starts with the immediates held for imm.
func (e *Engine) ImmCounter(imm uint32) (*ImmCounter, error) {
	if e == nil {
		return nil, errNilEngine
	}
	if e.life.closed.Load() {
		return nil, ErrClosed
	}
	if err := e.checkLeased("imm counter", imm); err != nil {
		return nil, err
	}
	ent := e.newEntry(imm, immCredit, 0, nil, nil)
	e.setEntry(imm, ent)
	return &ImmCounter{e: ent}, nil
}

// FlagCounter makes imm a flag counter that raises flag when the credits a
// Wait armed are paid (replacing any counter for it). It starts with the
// immediates held for imm.
func (e *Engine) FlagCounter(imm uint32, flag Flag) (*FlagCounter, error) {
	if e == nil {
		return nil, errNilEngine
	}
	if flag == nil {
		return nil, fmt.Errorf("flag counter %#x: nil flag: %w", imm, ErrInvalidArgument)
	}
	if e.life.closed.Load() {
		return nil, ErrClosed
	}
	if err := e.checkLeased("flag counter", imm); err != nil {
		return nil, err
	}
	ent := e.newEntry(imm, immFlag, 0, nil, flag)
	e.setEntry(imm, ent)
	return &FlagCounter{e: ent}, nil
}

func (e *Engine) newEntry(imm uint32, mode immMode, expected int64, fn func() bool, flag Flag) *immEntry {
	return &immEntry{imm: imm, mode: mode, expected: expected, fn: fn, flag: flag,
		wake: make(chan struct{}, 1), closed: &e.life.closed, eng: e}
}

// replayImm hands n immediates of imm that a removed counter had counted
// to whoever claims imm now: a counter registered since, else the OnImm
// callbacks, else the held store. Runs on the dispatcher.
func (e *Engine) replayImm(imm uint32, n int64) {
	e.imms.mu.Lock()
	if ent := (*e.imms.counters.Load())[imm]; ent != nil && e.creditLocked(ent, n) {
		e.imms.mu.Unlock()
		return
	}
	if imm >= LeaseBase && !e.leases.leased(imm) {
		e.immsDropped.Add(uint64(n))
		e.imms.mu.Unlock()
		return
	}
	fns := *e.imms.fns.Load()
	if len(fns) == 0 || imm >= LeaseBase {
		e.imms.held[imm] += n
		e.unclaimed.Add(uint64(n))
		e.imms.mu.Unlock()
		return
	}
	e.imms.mu.Unlock()
	for ; n > 0; n-- {
		for _, fn := range fns {
			fn(imm)
		}
	}
}

// deliverImm calls the OnImm callbacks for one immediate the worker found
// no counter for.
func (e *Engine) deliverImm(imm uint32) {
	for _, fn := range *e.imms.fns.Load() {
		fn(imm)
	}
}

// immReached runs an expected counter's callback on the dispatcher, once
// per full count: a counter that started with held immediates can have
// several waiting.
func (e *Engine) immReached(ent *immEntry) {
	for {
		if ent.v.Load() == immRemoved {
			return // removed while this event was queued
		}
		if !ent.fn() {
			break
		}
		if !ent.takeBacklog() {
			return
		}
	}
	e.imms.mu.Lock()
	cur := (*e.imms.counters.Load())[ent.imm]
	e.imms.mu.Unlock()
	if cur != ent {
		return
	}
	prev, had := e.setEntry(ent.imm, nil)
	if had && prev.Count > 0 {
		e.replayImm(ent.imm, prev.Count)
	}
}

// takeImmOut moves the events raised outside the workers into batch.
func (e *Engine) takeImmOut(batch []dispEvent) []dispEvent {
	e.imms.mu.Lock()
	defer e.imms.mu.Unlock()
	batch = append(batch, e.imms.out...)
	clear(e.imms.out)
	e.imms.out = e.imms.out[:0]
	return batch
}

// immTable is the engine's immediate state: the counters by value
// (copied on write, read by the workers without a lock), the OnImm
// callbacks, and what mu guards: held counts immediates that arrived with
// no counter and no OnImm callback, per value, until a counter claims
// them; out holds dispatcher events raised outside the workers (a
// registration that finds held immediates).
type immTable struct {
	counters atomic.Pointer[map[uint32]*immEntry]
	mu       sync.Mutex
	fns      atomic.Pointer[[]func(uint32)]
	held     map[uint32]int64
	out      []dispEvent
}
