package host

import (
	"context"
	"fmt"
	"sync"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/fabric"
)

// NodeMemory gives the ranks of one NVLink domain (here: ranks on one
// host) load/store access to each other's transport buffers, the host
// analogue of NVLink peer mappings.
type NodeMemory interface {
	// Share allocates this rank's send and receive buffers (zeroed, page
	// aligned, outside the Go heap, at least the sizes asked) and, once
	// every rank of the domain has allocated, returns all of them indexed
	// by node-local rank (this rank's own included).
	Share(ctx context.Context, sendBytes, recvBytes int) (send, recv [][]byte, err error)
	// Close releases the mappings. A domain's memory may be freed only once
	// every member closed, since peers read each other's buffers until then.
	Close() error
}

// LocalNode is a domain whose ranks live in one process: they share plain
// mmap'd buffers. Safe for concurrent use by its members.
type LocalNode struct {
	size   int
	mu     sync.Mutex
	ready  chan struct{}
	joined int
	closed int
	send   [][]byte
	recv   [][]byte
	bufs   []*fabric.HostBuffer
}

// NewLocalNode returns a domain of size members.
func NewLocalNode(size int) *LocalNode {
	return &LocalNode{size: size, ready: make(chan struct{}), send: make([][]byte, size), recv: make([][]byte, size)}
}

// Member returns the NodeMemory of node-local rank i.
func (n *LocalNode) Member(i int) NodeMemory { return &localMember{n: n, i: i} }

type localMember struct {
	n      *LocalNode
	i      int
	shared bool
	closed bool
}

func (m *localMember) Share(ctx context.Context, sendBytes, recvBytes int) ([][]byte, [][]byte, error) {
	n := m.n
	if m.shared || m.i < 0 || m.i >= n.size {
		return nil, nil, fmt.Errorf("local node member %d of %d: share twice or out of range: %w", m.i, n.size, a2a.ErrInvalidArgument)
	}
	s, err := fabric.AllocHost(sendBytes)
	if err != nil {
		return nil, nil, err
	}
	r, err := fabric.AllocHost(recvBytes)
	if err != nil {
		_ = s.Free()
		return nil, nil, err
	}
	m.shared = true
	n.mu.Lock()
	n.send[m.i], n.recv[m.i] = s.Bytes(), r.Bytes()
	n.bufs = append(n.bufs, s, r)
	n.joined++
	if n.joined == n.size {
		close(n.ready)
	}
	n.mu.Unlock()
	select {
	case <-n.ready:
		return n.send, n.recv, nil
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("local node: waiting for %d peers: %w: %w", n.size, a2a.ErrTimeout, ctx.Err())
	}
}

func (m *localMember) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	n := m.n
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed++
	if n.closed < n.size {
		return nil
	}
	var first error
	for _, b := range n.bufs {
		if err := b.Free(); err != nil && first == nil {
			first = err
		}
	}
	n.bufs = nil
	return first
}
