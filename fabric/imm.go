package fabric

import (
	"fmt"
	"slices"
)

// OnImm adds fn to the callbacks that receive immediates no counter claims.
// They run on the dispatcher, in the order they were added.
func (e *Engine) OnImm(fn func(imm uint32)) {
	e.immMu.Lock()
	defer e.immMu.Unlock()
	fns := append(slices.Clone(*e.immFns.Load()), fn)
	e.immFns.Store(&fns)
}

// PrevCount is what a replaced or removed counter had counted.
type PrevCount struct {
	Count    int64
	Expected uint32 // 0 for credit and flag counters
}

// setEntry installs ent for its immediate, replacing (and retiring) any
// previous counter, whose count is returned.
func (e *Engine) setEntry(imm uint32, ent *immEntry) (PrevCount, bool) {
	e.immMu.Lock()
	defer e.immMu.Unlock()
	old := *e.imm.Load()
	m := make(map[uint32]*immEntry, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	prev, had := old[imm]
	if ent == nil {
		delete(m, imm)
	} else {
		m[imm] = ent
	}
	e.imm.Store(&m)
	if !had {
		return PrevCount{}, false
	}
	n, _ := prev.remove()
	return PrevCount{Count: n, Expected: uint32(prev.expected)}, true
}

// ExpectImm makes imm a counter that calls fn on the dispatcher each time
// expected immediates have arrived. If fn returns true the counter keeps
// going (it was already reset, so it fires again after another expected
// arrivals); otherwise it is removed and any immediates counted since the
// reset are replayed to the OnImm callbacks. A counter already registered
// for imm is replaced (its count reset to 0) and its state returned.
// Register before peers can send: earlier arrivals went to OnImm.
func (e *Engine) ExpectImm(imm uint32, expected uint32, fn func() bool) (PrevCount, bool, error) {
	if expected == 0 || fn == nil {
		return PrevCount{}, false, fmt.Errorf("expect imm %#x: expected %d: %w", imm, expected, ErrInvalidArgument)
	}
	if e.closed.Load() {
		return PrevCount{}, false, ErrClosed
	}
	prev, had := e.setEntry(imm, &immEntry{imm: imm, mode: immExpected, expected: int64(expected), fn: fn})
	return prev, had, nil
}

// RemoveImmCount stops counting imm and returns what its counter had.
func (e *Engine) RemoveImmCount(imm uint32) (PrevCount, bool) {
	return e.setEntry(imm, nil)
}

// ImmCounter makes imm a credit counter (replacing any counter for it).
func (e *Engine) ImmCounter(imm uint32) (*ImmCounter, error) {
	if e.closed.Load() {
		return nil, ErrClosed
	}
	ent := &immEntry{imm: imm, mode: immCredit, wake: make(chan struct{}, 1)}
	e.setEntry(imm, ent)
	return &ImmCounter{e: ent}, nil
}

// FlagCounter makes imm a flag counter that raises flag when the credits a
// Wait armed are paid (replacing any counter for it).
func (e *Engine) FlagCounter(imm uint32, flag Flag) (*FlagCounter, error) {
	if flag == nil {
		return nil, fmt.Errorf("flag counter %#x: nil flag: %w", imm, ErrInvalidArgument)
	}
	if e.closed.Load() {
		return nil, ErrClosed
	}
	ent := &immEntry{imm: imm, mode: immFlag, flag: flag}
	e.setEntry(imm, ent)
	return &FlagCounter{e: ent}, nil
}

// deliverImm calls the OnImm callbacks n times for imm.
func (e *Engine) deliverImm(imm uint32, n int64) {
	fns := *e.immFns.Load()
	if len(fns) == 0 {
		e.unclaimed.Add(uint64(n))
		return
	}
	for ; n > 0; n-- {
		for _, fn := range fns {
			fn(imm)
		}
	}
}

// immReached runs an expected counter's callback on the dispatcher.
func (e *Engine) immReached(ent *immEntry) {
	if ent.v.Load() == immRemoved {
		return // removed while this event was queued
	}
	if ent.fn() {
		return
	}
	e.immMu.Lock()
	cur := (*e.imm.Load())[ent.imm]
	e.immMu.Unlock()
	if cur != ent {
		return
	}
	prev, had := e.setEntry(ent.imm, nil)
	if had && prev.Count > 0 {
		e.deliverImm(ent.imm, prev.Count)
	}
}
