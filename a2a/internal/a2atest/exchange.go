package a2atest

import (
	"context"
	"sync"
)

// Exchange is a one-shot all-gather among the ranks of one process: the
// Exchanger of backends whose ranks are goroutines.
type Exchange struct {
	mu    sync.Mutex
	data  [][]byte
	n     int
	ready chan struct{}
}

// NewExchange returns an exchange among w ranks.
func NewExchange(w int) *Exchange {
	return &Exchange{data: make([][]byte, w), ready: make(chan struct{})}
}

// Member is rank r's side of an Exchange.
type Member struct {
	x *Exchange
	r int
}

// Member returns rank r's side.
func (x *Exchange) Member(r int) Member { return Member{x, r} }

// AllGather contributes data and returns every rank's, in rank order, once
// all have contributed.
func (m Member) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	x := m.x
	x.mu.Lock()
	x.data[m.r] = data
	x.n++
	if x.n == len(x.data) {
		close(x.ready)
	}
	x.mu.Unlock()
	select {
	case <-x.ready:
		return x.data, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
