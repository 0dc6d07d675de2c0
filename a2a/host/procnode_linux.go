package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/nodeshare"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/shm"
)

// ProcessNode shares transport buffers between the processes of one
// domain on one machine: each rank maps its buffers from two memfds and
// hands the descriptors to its node peers over an abstract unix socket
// (SCM_RIGHTS), the way CUDA VMM handles travel between GPU processes
// (a2a/internal/nodeshare runs the exchange for both backends). Abstract
// sockets and memfds leave nothing in the file system, so a crashed job
// leaks no /dev/shm files. Linux only.
//
// Every rank of the world must use a ProcessNode (Share all-gathers the
// socket names over the whole world), created with the world's Config.
// It keeps its two memfds open, so that a restarted node peer can map
// them (NodeRejoiner): at a reshare each member listens on a fresh
// socket, whose name travels in the membership's exchange, and unmaps
// what it mapped of a dead incarnation.
type ProcessNode struct {
	l          a2a.Layout
	ex         Exchanger
	own        []*fabric.HostBuffer // this rank's buffers: shareable by the engine too (ipc)
	node       *nodeshare.Member[[]byte]
	used, done bool
}

var _ NodeRejoiner = (*ProcessNode)(nil)

// NewProcessNode returns rank cfg.Rank's member of its domain. ex reaches
// the whole world, for Share; a rank built to join calls Alloc instead
// and may pass nil.
func NewProcessNode(cfg a2a.Config, ex Exchanger) (*ProcessNode, error) {
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	return &ProcessNode{l: l, ex: ex}, nil
}

func (n *ProcessNode) base() int { return n.l.Node(n.l.Rank) * n.l.NVLinkSize }
func (n *ProcessNode) me() int   { return n.l.Rank - n.base() }

// memfdImporter maps a node peer's memfd, once it is sealed against
// shrinking under the mapping.
type memfdImporter struct{}

func (memfdImporter) Import(fd, size int) ([]byte, error) {
	if err := shm.CheckSealed(fd, uint64(size)); err != nil {
		return nil, fmt.Errorf("%w: %w", err, a2a.ErrInvalidArgument)
	}
	return shm.Map(fd, 0, size)
}

func (memfdImporter) Release(b []byte) error { return shm.Unmap(b) }

// alloc makes and maps this rank's two memfds.
func (n *ProcessNode) alloc(sendBytes, recvBytes int) error {
	if n.used || n.done {
		return fmt.Errorf("process node: share twice or after close: %w", a2a.ErrInvalidArgument)
	}
	n.used = true
	if sendBytes <= 0 || recvBytes <= 0 {
		return fmt.Errorf("process node: buffers of %d and %d bytes: %w", sendBytes, recvBytes, a2a.ErrInvalidArgument)
	}
	fds := [2]int{-1, -1}
	sizes := [2]int{sendBytes, recvBytes}
	for i, size := range sizes {
		fd, err := shm.Create(fmt.Sprintf("ferry-a2a-%d-%d", n.l.Rank, i), int64(size))
		if err != nil {
			shm.CloseAll(fds[:i])
			return fmt.Errorf("process node: %w", err)
		}
		fds[i] = fd
		// Mapped through fabric, so the engine's ipc transport can share
		// the receive buffer with ranks of other nodes of this host.
		hb, err := fabric.MapHostFile(fd, size)
		if err != nil {
			shm.CloseAll(fds[:i+1])
			return fmt.Errorf("process node: %w", err)
		}
		n.own = append(n.own, hb)
	}
	spec := nodeshare.Spec{World: n.l.WorldSize, Rank: n.l.Rank, Index: n.me(), Size: n.l.NVLinkSize,
		Asked: [2]uint64{uint64(sendBytes), uint64(recvBytes)}}
	spec.Exported = spec.Asked
	node, err := nodeshare.New(spec, fds, nodeshare.Importer[[]byte](memfdImporter{}))
	if err != nil {
		return fmt.Errorf("process node: %w", err)
	}
	n.node = node
	return nil
}

// views returns every buffer by node-local rank (nil for a peer not mapped).
func (n *ProcessNode) views() (send, recv [][]byte) {
	S := n.l.NVLinkSize
	send, recv = make([][]byte, S), make([][]byte, S)
	for i := range S {
		send[i], recv[i], _ = n.node.Peer(i)
	}
	send[n.me()], recv[n.me()] = n.own[0].Bytes(), n.own[1].Bytes()
	return send, recv
}

func (n *ProcessNode) Share(ctx context.Context, sendBytes, recvBytes int) (send, recv [][]byte, err error) {
	if n.ex == nil {
		return nil, nil, fmt.Errorf("process node: share needs an exchanger: %w", a2a.ErrInvalidArgument)
	}
	defer func() {
		if err != nil {
			_ = n.Close()
		}
	}()
	if err := n.alloc(sendBytes, recvBytes); err != nil {
		return nil, nil, err
	}
	if err := n.node.Share(ctx, n.ex); err != nil {
		return nil, nil, fmt.Errorf("process node: %w", err)
	}
	send, recv = n.views()
	return send, recv, nil
}

// Alloc makes this rank's buffers alone, for a backend built to join.
func (n *ProcessNode) Alloc(sendBytes, recvBytes int) (send, recv [][]byte, err error) {
	if err := n.alloc(sendBytes, recvBytes); err != nil {
		_ = n.Close()
		return nil, nil, err
	}
	send, recv = n.views()
	return send, recv, nil
}

// Offer listens on a fresh socket and returns its name.
func (n *ProcessNode) Offer(uint32) ([]byte, error) {
	if n.node == nil || n.done {
		return nil, fmt.Errorf("process node: offer without buffers: %w", a2a.ErrInvalidArgument)
	}
	return n.node.Offer()
}

func (n *ProcessNode) Reshare(ctx context.Context, _ uint32, offers [][]byte) (send, recv [][]byte, err error) {
	if n.node == nil || n.done {
		if offers == nil {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("process node: reshare without buffers: %w", a2a.ErrInvalidArgument)
	}
	if err := n.node.Reshare(ctx, offers); err != nil {
		return nil, nil, fmt.Errorf("process node: %w", err)
	}
	if offers == nil {
		return nil, nil, nil
	}
	send, recv = n.views()
	return send, recv, nil
}

// Close unmaps every buffer this process mapped and closes its memfds.
// The memory itself goes away with the last process that maps it.
func (n *ProcessNode) Close() error {
	if n.done {
		return nil
	}
	n.done = true
	var errs []error
	if n.node != nil {
		errs = append(errs, n.node.Close())
	}
	for _, b := range n.own {
		errs = append(errs, b.Free())
	}
	n.own = nil
	return errors.Join(errs...)
}
