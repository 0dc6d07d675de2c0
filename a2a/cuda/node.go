package cuda

import (
	"context"
	"fmt"
	"sync"

	"github.com/ferryrdma/ferry/a2a"
)

// LocalNode is a domain whose ranks live in one process (one GPU, or GPUs
// with peer access, or the emulator): they share plain device pointers.
// Safe for concurrent use by its members.
type LocalNode struct {
	dev    Device
	mapped bool
	size   int
	mu     sync.Mutex
	ready  chan struct{}
	joined int
	closed int
	send   []uint64
	recv   []uint64
	mems   []Memory
	own    [][2]Memory
}

// NewLocalNode returns a domain of size members allocating on dev.
func NewLocalNode(dev Device, size int) *LocalNode {
	return &LocalNode{dev: dev, size: size, ready: make(chan struct{}), send: make([]uint64, size),
		recv: make([]uint64, size), own: make([][2]Memory, size)}
}

// NewMappedLocalNode is NewLocalNode with the buffers in host memory
// mapped into the device (Device.AllocMapped): slower for the kernels,
// but any host-memory transport can carry them (on a GPU without an
// RDMA-capable fabric, the in-process "mem" transport copies them by
// host address, the device address of mapped memory under unified
// addressing).
func NewMappedLocalNode(dev Device, size int) *LocalNode {
	n := NewLocalNode(dev, size)
	n.mapped = true
	return n
}

// Member returns the NodeMemory of node-local rank i.
func (n *LocalNode) Member(i int) *LocalMember { return &LocalMember{n: n, i: i} }

// LocalMember is one rank's share of a LocalNode.
type LocalMember struct {
	n      *LocalNode
	i      int
	shared bool
	closed bool
}

var _ NodeMemory = (*LocalMember)(nil)

// Buffers returns this member's send and receive buffers once shared.
func (m *LocalMember) Buffers() (send, recv Memory) {
	m.n.mu.Lock()
	defer m.n.mu.Unlock()
	return m.n.own[m.i][0], m.n.own[m.i][1]
}

func (m *LocalMember) Share(ctx context.Context, sendBytes, recvBytes int) ([]uint64, []uint64, error) {
	n := m.n
	if m.shared || m.i < 0 || m.i >= n.size {
		return nil, nil, fmt.Errorf("local node member %d of %d: share twice or out of range: %w", m.i, n.size, a2a.ErrInvalidArgument)
	}
	alloc := n.dev.Alloc
	if n.mapped {
		alloc = n.dev.AllocMapped
	}
	s, err := alloc(sendBytes)
	if err != nil {
		return nil, nil, err
	}
	r, err := alloc(recvBytes)
	if err != nil {
		_ = s.Free()
		return nil, nil, err
	}
	m.shared = true
	n.mu.Lock()
	n.send[m.i], n.recv[m.i] = s.Addr(), r.Addr()
	n.own[m.i] = [2]Memory{s, r}
	n.mems = append(n.mems, s, r)
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

// Close frees the domain's memory once every member closed.
func (m *LocalMember) Close() error {
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
	for _, b := range n.mems {
		if err := b.Free(); err != nil && first == nil {
			first = err
		}
	}
	n.mems = nil
	return first
}
