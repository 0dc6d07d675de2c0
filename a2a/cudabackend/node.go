package cudabackend

import (
	"context"
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/meet"
)

// LocalNode is a domain whose ranks live in one process (one GPU, or GPUs
// with peer access, or the emulator): they share plain device pointers.
// Safe for concurrent use by its members.
type LocalNode struct {
	dev    Device
	mapped bool
	m      *meet.Meeting[[2]Memory]
}

// NewLocalNode returns a domain of size members allocating on dev.
func NewLocalNode(dev Device, size int) *LocalNode {
	return &LocalNode{dev: dev, m: meet.New[[2]Memory](size)}
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
	n         *LocalNode
	i         int
	send, rcv Memory
	shared    bool
	closed    bool
}

var _ NodeMemory = (*LocalMember)(nil)

// Buffers returns this member's send and receive buffers once shared.
func (m *LocalMember) Buffers() (send, recv Memory) { return m.send, m.rcv }

func (m *LocalMember) Share(ctx context.Context, sendBytes, recvBytes int) ([]uint64, []uint64, error) {
	if m.shared || m.i < 0 || m.i >= m.n.m.Size() {
		return nil, nil, fmt.Errorf("local node member %d of %d: share twice or out of range: %w", m.i, m.n.m.Size(), a2a.ErrInvalidArgument)
	}
	m.shared = true
	alloc := m.n.dev.Alloc
	if m.n.mapped {
		alloc = m.n.dev.AllocMapped
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
	m.send, m.rcv = s, r
	all, err := m.n.m.Join(ctx, m.i, [2]Memory{s, r})
	if err != nil {
		return nil, nil, err
	}
	send, recv := make([]uint64, len(all)), make([]uint64, len(all))
	for i, b := range all {
		send[i], recv[i] = b[0].Addr(), b[1].Addr()
	}
	return send, recv, nil
}

// Close frees the domain's memory once every member closed.
func (m *LocalMember) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	for _, b := range m.n.m.Leave() {
		errs = append(errs, b[0].Free(), b[1].Free())
	}
	return errors.Join(errs...)
}
