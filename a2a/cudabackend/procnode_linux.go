package cudabackend

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/nodeshare"
	"github.com/ferryrdma/ferry/internal/shm"
)

// ProcessNode shares the transport buffers of an NVLink domain whose ranks
// are separate processes of one machine: every rank allocates its send and
// receive buffers as exportable memory of its device (CUDA VMM with POSIX
// file descriptor handles on a GPU, sealed memfds on the emulator) and
// offers the two descriptors to each node peer over a unix socket
// (SCM_RIGHTS); the peer imports and maps them for its own device and
// answers once it has. Share returns when this rank mapped every peer's
// buffers and every peer confirmed it mapped this rank's. The exchange is
// a2a/internal/nodeshare's, the same as a2a/host.ProcessNode's.
//
// Sockets live in the abstract namespace under random names, so nothing
// is left in the file system, and the descriptors in flight die with the
// socket when a process does. Every rank of the world must use a
// ProcessNode made with the world's Config (Share all-gathers the socket
// names over the whole world). Share and Close are called from one
// goroutine; Close releases the peers' mappings, then this rank's memory.
type ProcessNode struct {
	l      a2a.Layout
	ex     Exchanger
	dev    ExportingDevice
	own    []ExportableMemory // send, receive
	node   *nodeshare.Member[Memory]
	shared bool
	closed bool
}

var _ NodeMemory = (*ProcessNode)(nil)

// NewProcessNode returns rank cfg.Rank's member of its domain, allocating
// on dev.
func NewProcessNode(cfg a2a.Config, ex Exchanger, dev ExportingDevice) (*ProcessNode, error) {
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	if ex == nil || dev == nil {
		return nil, fmt.Errorf("a2a cuda process node: exchanger and device are required: %w", a2a.ErrInvalidArgument)
	}
	return &ProcessNode{l: l, ex: ex, dev: dev}, nil
}

// Buffers returns this rank's own send and receive memory once shared.
func (n *ProcessNode) Buffers() (send, recv Memory) {
	if len(n.own) < 2 {
		return nil, nil
	}
	return n.own[0], n.own[1]
}

// deviceImporter maps node peers' exports into this rank's device.
type deviceImporter struct{ dev ExportingDevice }

func (d deviceImporter) Import(fd, size int) (Memory, error) { return d.dev.Import(fd, size) }
func (deviceImporter) Release(m Memory) error                { return m.Free() }

// Share allocates this rank's buffers and exchanges them with the node
// peers. A peer that does not show up by ctx's deadline (a minute without
// one) makes it fail with an error wrapping a2a.ErrTimeout that names the
// missing node ranks; a malformed or mismatched offer (another config)
// wraps a2a.ErrInvalidArgument. On error everything is released.
func (n *ProcessNode) Share(ctx context.Context, sendBytes, recvBytes int) (send, recv []uint64, err error) {
	if n.shared || n.closed || sendBytes <= 0 || recvBytes <= 0 {
		return nil, nil, fmt.Errorf("a2a cuda process node: share twice, after close, or of %d and %d bytes: %w",
			sendBytes, recvBytes, a2a.ErrInvalidArgument)
	}
	n.shared = true
	defer func() {
		if err != nil {
			_ = n.Close()
		}
	}()
	S := n.l.NVLinkSize
	me := n.l.Rank - n.l.Node(n.l.Rank)*S
	for _, size := range []int{sendBytes, recvBytes} {
		m, err := n.dev.AllocExportable(size)
		if err != nil {
			return nil, nil, fmt.Errorf("a2a cuda process node: allocate %d bytes: %w", size, err)
		}
		n.own = append(n.own, m)
	}
	send, recv = make([]uint64, S), make([]uint64, S)
	send[me], recv[me] = n.own[0].Addr(), n.own[1].Addr()
	if S == 1 {
		return send, recv, nil
	}
	fds := [2]int{-1, -1}
	for i, m := range n.own {
		if fds[i], err = m.Export(); err != nil {
			shm.CloseAll(fds[:i])
			return nil, nil, fmt.Errorf("a2a cuda process node: export: %w", err)
		}
	}
	spec := nodeshare.Spec{World: n.l.WorldSize, Rank: n.l.Rank, Index: me, Size: S,
		Asked:    [2]uint64{uint64(sendBytes), uint64(recvBytes)},
		Exported: [2]uint64{uint64(n.own[0].Size()), uint64(n.own[1].Size())}}
	if n.node, err = nodeshare.New(spec, fds, nodeshare.Importer[Memory](deviceImporter{n.dev})); err != nil {
		return nil, nil, fmt.Errorf("a2a cuda process node: %w", err)
	}
	if err := n.node.Share(ctx, n.ex); err != nil {
		return nil, nil, fmt.Errorf("a2a cuda process node: %w", err)
	}
	for i := range S {
		if s, r, ok := n.node.Peer(i); ok {
			send[i], recv[i] = s.Addr(), r.Addr()
		}
	}
	return send, recv, nil
}

// Close releases the node peers' mappings, then this rank's buffers. The
// memory itself lives on while any process still maps it. Idempotent.
func (n *ProcessNode) Close() error {
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	if n.node != nil {
		errs = append(errs, n.node.Close())
	}
	for _, m := range slices.Backward(n.own) {
		errs = append(errs, m.Free())
	}
	n.node, n.own = nil, nil
	return errors.Join(errs...)
}
