package emulated

import (
	"context"
	"unsafe"

	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/host"
)

// HostNode adapts a host-memory domain (host.LocalNode's members, or
// host.ProcessNode: memfd mappings passed over unix sockets between
// processes) to the CUDA backend, whose kernels address its memory
// directly on the emulator.
type HostNode struct {
	host.NodeMemory
	me         int
	send, recv []byte
}

var _ cudabackend.NodeMemory = (*HostNode)(nil)

// NewHostNode wraps n, the domain memory of node-local rank me.
func NewHostNode(n host.NodeMemory, me int) *HostNode { return &HostNode{NodeMemory: n, me: me} }

func addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

func (n *HostNode) Share(ctx context.Context, sendBytes, recvBytes int) ([]uint64, []uint64, error) {
	send, recv, err := n.NodeMemory.Share(ctx, sendBytes, recvBytes)
	if err != nil {
		return nil, nil, err
	}
	n.send, n.recv = send[n.me], recv[n.me]
	s, r := make([]uint64, len(send)), make([]uint64, len(recv))
	for i := range send {
		s[i], r[i] = addr(send[i]), addr(recv[i])
	}
	return s, r, nil
}

// Buffers returns this rank's own send and receive buffers once shared
// (the receive buffer includes the backend's sync slots at its tail).
func (n *HostNode) Buffers() (send, recv []byte) { return n.send, n.recv }
