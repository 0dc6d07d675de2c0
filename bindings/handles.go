package main

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// handleTable names Go objects with integers, so C never holds a Go
// pointer (the cgo rules forbid it, and a garbage-collected object cannot
// be pinned for an unbounded time). Handles count up from 1 and are never
// reused, so a stale handle cannot alias a newer object. Lookups are the
// hot path of every submit: sync.Map reads take no lock.
type handleTable struct {
	next atomic.Uint64
	m    sync.Map // uint64 -> object
}

// handles is the process-wide table behind every ferry_*_t.
var handles handleTable

// add stores v and returns its new handle.
func (t *handleTable) add(v any) uint64 {
	h := t.next.Add(1)
	t.m.Store(h, v)
	return h
}

// remove releases h and returns what it named.
func (t *handleTable) remove(h uint64) (any, bool) {
	return t.m.LoadAndDelete(h)
}

// len counts live handles (ferry_live_handles: tests use it to check
// that nothing leaks).
func (t *handleTable) len() int {
	n := 0
	t.m.Range(func(any, any) bool { n++; return true })
	return n
}

// lookup returns the object of kind T that h names, or an error wrapping
// errBadHandle.
func lookup[T any](t *handleTable, h uint64, kind string) (T, error) {
	var zero T
	v, ok := t.m.Load(h)
	if !ok {
		return zero, fmt.Errorf("%s handle %d: %w", kind, h, errBadHandle)
	}
	o, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("handle %d is not a %s: %w", h, kind, errBadHandle)
	}
	return o, nil
}

// release removes h if it names an object of kind T.
func release[T any](t *handleTable, h uint64, kind string) (T, error) {
	o, err := lookup[T](t, h, kind)
	if err != nil {
		return o, err
	}
	if _, ok := t.m.LoadAndDelete(h); !ok {
		// Another thread released it between the two steps.
		var zero T
		return zero, fmt.Errorf("%s handle %d: %w", kind, h, errBadHandle)
	}
	return o, nil
}

// family is an object that owns other handles (an engine its regions and
// counters, a directory its publications and watches): they are released
// when it closes.
type family struct {
	mu       sync.Mutex
	closed   bool
	children map[uint64]struct{}
}

// adopt registers h as a child; false if the owner closed meanwhile (the
// caller then undoes what it made).
func (f *family) adopt(h uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.children[h] = struct{}{}
	return true
}

// disown forgets h, released on its own.
func (f *family) disown(h uint64) {
	f.mu.Lock()
	delete(f.children, h)
	f.mu.Unlock()
}
