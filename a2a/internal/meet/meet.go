// Package meet is the rendezvous behind in-process node memory of the CUDA
// backend (a2a/cudabackend LocalNode): every member of a domain contributes its
// buffers once, and each gets everyone's once all have; the last member
// to leave frees them.
package meet

import (
	"context"
	"fmt"
	"sync"

	"github.com/ferryrdma/ferry/a2a"
)

// Meeting gathers one value from each of n members. Safe for concurrent
// use by its members.
type Meeting[T any] struct {
	mu     sync.Mutex
	ready  chan struct{}
	vals   []T
	set    []bool
	joined int
	left   int
}

// New returns a meeting of n members.
func New[T any](n int) *Meeting[T] {
	return &Meeting[T]{ready: make(chan struct{}), vals: make([]T, n), set: make([]bool, n)}
}

// Size is the number of members.
func (m *Meeting[T]) Size() int { return len(m.vals) }

// Join records member i's value and waits until every member has joined,
// then returns all values by member (shared: do not modify). Joining twice
// or out of range is an ArgumentError-wrapped a2a.ErrInvalidArgument.
func (m *Meeting[T]) Join(ctx context.Context, i int, v T) ([]T, error) {
	m.mu.Lock()
	if i < 0 || i >= len(m.vals) || m.set[i] {
		m.mu.Unlock()
		return nil, fmt.Errorf("node member %d of %d: joined twice or out of range: %w", i, len(m.vals), a2a.ErrInvalidArgument)
	}
	m.vals[i], m.set[i] = v, true
	m.joined++
	if m.joined == len(m.vals) {
		close(m.ready)
	}
	m.mu.Unlock()
	select {
	case <-m.ready:
		return m.vals, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("node: waiting for %d members: %w: %w", len(m.vals), a2a.ErrTimeout, ctx.Err())
	}
}

// Leave records that a member is done with everyone's values and returns
// the values that were contributed when it is the last to leave (nil
// otherwise): their memory may be freed only then, since members read
// each other's buffers until they leave.
func (m *Meeting[T]) Leave() []T {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.left++
	if m.left < len(m.vals) {
		return nil
	}
	var out []T
	for i, ok := range m.set {
		if ok {
			out = append(out, m.vals[i])
		}
	}
	return out
}
