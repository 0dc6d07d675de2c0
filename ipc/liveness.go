package ipc

import (
	"fmt"

	"github.com/ferryrdma/ferry/fabric"
)

// A peer's liveness needs no heartbeat: the kernel closes a process's
// sockets when it exits, however it exits, and the reader of the control
// connection then marks the peer dead. The engine learns it from the
// first operation that fails, or from CheckPeer at its liveness interval.
var _ fabric.PeerChecker = (*Domain)(nil)

// CheckPeer reports a peer whose control connection ended (its process
// exited or crashed, or it closed its domain): nothing more can reach it.
func (d *Domain) CheckPeer(p fabric.PeerID) error {
	if uint64(p) >= uint64(len(d.peers)) {
		return nil
	}
	if pr := d.peers[p]; pr.state.Load() == peerDead {
		return fmt.Errorf("ipc peer %s: its connection ended (process gone or domain closed): %w", pr.ea, fabric.ErrPeerLost)
	}
	return nil
}
