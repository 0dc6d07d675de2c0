package verbs

import "github.com/ferryrdma/ferry/fabric/rdma"

// Peer liveness. A peer nothing is sent to would never show that its
// process died: its queue pairs vanish with it, but this side learns of
// that only from an op. So the domain offers the engine a heartbeat
// (rdma.PeerProber): a zero-length RDMA WRITE without immediate on the
// peer's RMA queue pair, every Config.LivenessInterval to each watched
// peer (Engine.WatchPeer, ImmCounter.Watch).
//
// It is harmless to a live peer, and needs no key exchange, because of
// what the InfiniBand spec requires of a zero-length RDMA WRITE (C9-88):
// the responder checks neither its R_Key nor its virtual address, so
// both are 0 here, and nothing is written. Without an immediate it
// consumes no receive and makes no completion at the target; the peer's
// software never sees it. Soft-RoCE skips the key check for zero-byte
// ops (rxe_resp.c, check_rkey), ConnectX follows the spec. A device that
// did check would fail the heartbeat with a remote access error, which
// moves the queue pair to ERR and reconnects it: that would show as
// churn, never as a lost peer (only the errors below blame the peer).
//
// On RC the requester completes a write only once the responder's HCA has
// acknowledged it. A peer whose process died has no queue pair left to
// answer, so the write is retransmitted for the queue pair's retry budget
// (qpattr.go: about half a second) and completes with
// IBV_WC_RETRY_EXC_ERR, which describeEvent marks as the peer's
// (rdma.ErrPeerLost): the engine declares the peer lost. A heartbeat to
// a peer that is not connected yet is held like any write and posted once
// the handshake ends, or fails at the handshake deadline (also the
// peer's), so the first heartbeat to a new peer is what connects it.

var _ rdma.PeerProber = (*Domain)(nil)

// ProbeOp returns the heartbeat to peer p: zero bytes, no immediate, no
// remote address or key. The engine sets Context (and may fill Local,
// which a zero-length write does not read).
func (d *Domain) ProbeOp(p rdma.PeerID) (rdma.WriteOp, bool) {
	if d.closed || int(p) >= len(d.peers) {
		return rdma.WriteOp{}, false
	}
	return rdma.WriteOp{Peer: p}, true
}
