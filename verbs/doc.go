// Package verbs is ferry's libibverbs provider: RDMA over ConnectX and other
// verbs devices (InfiniBand and RoCE), and over Soft-RoCE (rdma_rxe), which
// is how it is tested on machines without a NIC (make test-verbs).
//
// Importing the package registers a rdma.Provider named "verbs" serving
// the transport "verbs"; a fabric.Engine opened with that transport (or
// "auto" where no EFA device exists) uses it. [Devices] lists the devices,
// ports, link speeds, GIDs and PCI addresses for diagnostics (fabric-debug
// info). On a machine without RDMA every entry point returns an error
// wrapping rdma.ErrNotSupported.
//
// # One domain
//
// A [Domain] is one port of one device, owned by one worker goroutine. It
// holds:
//   - a protection domain, with a thread domain and parent domain where the
//     device supports them (ConnectX), so posting takes no locks;
//   - one completion queue sized for everything that can be outstanding at
//     once (send-side slots, user receives, the RMA SRQ, the UD queues), so
//     it can never overflow;
//   - a message SRQ for two-sided receives and an RMA SRQ of zero-length
//     receives consumed by incoming writes with immediate, re-filled by the
//     poller;
//   - a UD queue pair, whose address (GID, QPN, LID) is the domain's
//     public rdma.Address.
//
// # Connections
//
// Peers are connected lazily and symmetrically: ResolvePeer (or the first
// op) sends a handshake over UD; both ends create two RC queue pairs for
// the pair of domains (messages, RMA), walk them RESET→INIT→RTR→RTS and
// confirm. Lost datagrams are retransmitted with backoff; when no answer
// comes before DomainOptions.HandshakeTimeout, the ops held for that peer
// fail as Events whose error wraps rdma.ErrTimeout, and a later op starts
// over. See handshake.go for the state machine.
//
// # Data path
//
// PostWrites takes a batch of rdma.WriteOp and crosses into C once: runs
// of up to four ops to the same peer become one chained ibv_post_send.
// When the send queue or the slot table is full the call returns how many
// ops it took, having walked the chain to bad_wr, and the engine retries
// after the next Poll. wr_id carries the op kind and a slot index, because
// error completions leave the opcode undefined. Immediates are converted
// to and from network byte order on both sides. Memory is registered with
// relaxed ordering, and GPU memory with a dma-buf fd through
// ibv_reg_dmabuf_mr.
//
// # Peer liveness
//
// An error completion whose retries ran out (the remote HCA stopped
// acknowledging) and a handshake nobody answered blame the peer: their
// errors wrap rdma.ErrPeerLost, and the engine declares the peer lost.
// A peer the engine watches but sends nothing to (Engine.WatchPeer,
// ImmCounter.Watch) gets a heartbeat every Config.LivenessInterval
// ([Domain.ProbeOp]): a zero-length RDMA WRITE without immediate, with no
// key and no address, which the InfiniBand spec (C9-88) has the responder
// accept without checking either. A live peer's HCA acknowledges it and
// its software never sees it; a peer whose process died leaves it
// unacknowledged, and it fails with retry exceeded after the queue pair's
// retry budget (about half a second). See liveness.go.
package verbs
