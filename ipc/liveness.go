package ipc

import (
	"fmt"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// A peer's liveness needs no heartbeat: the kernel closes a process's
// sockets when it exits, however it exits, and the reader of the control
// connection then marks the peer dead (and, when the process is exiting,
// every other endpoint of it this process is connected to: see
// process.go). The engine learns it from the first operation that fails,
// or from CheckPeer at its liveness interval. A dead peer is gone for
// good: its address named one domain of one process, and no later domain
// has it.
var _ rdma.PeerChecker = (*Domain)(nil)

// CheckPeer reports a peer whose control connection ended (its process
// exited or crashed, or it closed its domain): nothing more can reach it,
// and no write to it is ever carried out again. The error is the
// provider's, as a failed write's would be, and a stale-descriptor error.
func (d *Domain) CheckPeer(p rdma.PeerID) error {
	if uint64(p) >= uint64(len(d.peers)) {
		return nil
	}
	if pr := d.peers[p]; pr.state.Load() == peerDead {
		why := "its connection ended (process gone or domain closed)"
		if pr.ended.Load() {
			why = "its process exited"
		}
		errno := pr.deadErrno()
		if errno == errnoPeerClosed {
			why = "it closed its domain"
		}
		pe := &rdma.ProviderError{Provider: TransportName, Op: "peer check", Errno: int(errno),
			Msg: fmt.Sprintf("%s: %s", pr.ea, why), PeerLost: true, PeerClosed: errno == errnoPeerClosed}
		// Its nonce is never used again: descriptors naming it are stale.
		return fmt.Errorf("%w: %w", pe, rdma.StaleError(pr.addr, why))
	}
	return nil
}
