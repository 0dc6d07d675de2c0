package host

import (
	"context"
	"fmt"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/meet"
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

// LocalNode is a domain whose ranks live in one process: they share
// plain mmap'd buffers. Safe for concurrent use by its members.
type LocalNode struct {
	m *meet.Meeting[[2]*fabric.HostBuffer]
}

// NewLocalNode returns a domain of size members.
func NewLocalNode(size int) *LocalNode {
	return &LocalNode{m: meet.New[[2]*fabric.HostBuffer](size)}
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
	if m.shared || m.i < 0 || m.i >= m.n.m.Size() {
		return nil, nil, fmt.Errorf("local node member %d of %d: share twice or out of range: %w", m.i, m.n.m.Size(), a2a.ErrInvalidArgument)
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
	all, err := m.n.m.Join(ctx, m.i, [2]*fabric.HostBuffer{s, r})
	if err != nil {
		return nil, nil, err
	}
	send, recv := make([][]byte, len(all)), make([][]byte, len(all))
	for i, b := range all {
		send[i], recv[i] = b[0].Bytes(), b[1].Bytes()
	}
	return send, recv, nil
}

func (m *localMember) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	var first error
	for _, b := range m.n.m.Leave() {
		for _, h := range b {
			if err := h.Free(); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}
