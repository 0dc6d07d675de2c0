//go:build cgo

package efa

import (
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ofi"
)

// The op and event slices go to C as they are; these declarations fail to
// compile if their size ever drifts from the C structs' (64, 40, 32 and 32
// bytes). Field offsets are checked by TestLayout.
var (
	_ [unsafe.Sizeof(rdma.WriteOp{}) - 64]byte
	_ [64 - unsafe.Sizeof(rdma.WriteOp{})]byte
	_ [unsafe.Sizeof(rdma.SendOp{}) - 40]byte
	_ [40 - unsafe.Sizeof(rdma.SendOp{})]byte
	_ [unsafe.Sizeof(rdma.RecvOp{}) - 32]byte
	_ [32 - unsafe.Sizeof(rdma.RecvOp{})]byte
	_ [unsafe.Sizeof(rdma.Event{}) - 32]byte
	_ [32 - unsafe.Sizeof(rdma.Event{})]byte
)

// PostWrites posts writes with fi_writemsg, in order, until the provider
// is busy, in one call into C. Writes with rdma.WriteHasImm carry Imm as
// remote CQ data. Immediate-only writes (Length 0) still pass one empty
// local iov and a remote iov with the op's key and address, which some
// providers require. The returned error, if any, is for ops[n].
func (d *Domain) PostWrites(ops []rdma.WriteOp) (int, error) {
	if d.ep == nil {
		return 0, errClosed
	}
	if len(ops) == 0 {
		return 0, nil
	}
	// Ops to a shm peer known dead are not posted (deathwatch.go); other
	// providers have no watcher and pay one nil check.
	live := len(ops)
	if d.watch != nil {
		live = d.firstDeadWrite(ops)
	}
	n := 0
	if live > 0 {
		var err error
		n, err = d.ep.PostWrites(&ops[0], live)
		if err != nil {
			return n, callError(d.transport, "fi_writemsg", err)
		}
	}
	// Once per run of ops to one peer, and only while some peer is
	// stalled or dead: a batch accepted after a refusal (the provider's
	// queue was full) would otherwise pay two map deletes per op.
	for i := 0; i < n && (len(d.stalls) > 0 || len(d.dead) > 0); i++ {
		if p := ops[i].Peer; i == 0 || p != ops[i-1].Peer {
			d.accepted(p)
		}
	}
	if n < live {
		return n, d.refused(ops[n].Peer, "fi_writemsg")
	}
	if live < len(ops) {
		return n, d.deadPeerError(ops[n].Peer, "fi_writemsg")
	}
	return n, nil
}

// PostSends posts sends with fi_sendmsg, like PostWrites.
func (d *Domain) PostSends(ops []rdma.SendOp) (int, error) {
	if d.ep == nil {
		return 0, errClosed
	}
	if len(ops) == 0 {
		return 0, nil
	}
	live := len(ops)
	if d.watch != nil {
		live = d.firstDeadSend(ops)
	}
	n := 0
	if live > 0 {
		var err error
		n, err = d.ep.PostSends(&ops[0], live)
		if err != nil {
			return n, callError(d.transport, "fi_sendmsg", err)
		}
	}
	for i := 0; i < n && (len(d.stalls) > 0 || len(d.dead) > 0); i++ {
		if p := ops[i].Peer; i == 0 || p != ops[i-1].Peer {
			d.accepted(p)
		}
	}
	if n < live {
		return n, d.refused(ops[n].Peer, "fi_sendmsg")
	}
	if live < len(ops) {
		return n, d.deadPeerError(ops[n].Peer, "fi_sendmsg")
	}
	return n, nil
}

// PostRecvs posts receive buffers for any sender with fi_recvmsg.
func (d *Domain) PostRecvs(ops []rdma.RecvOp) (int, error) {
	if d.ep == nil {
		return 0, errClosed
	}
	if len(ops) == 0 {
		return 0, nil
	}
	n, err := d.ep.PostRecvs(&ops[0], len(ops))
	if err != nil {
		return n, callError(d.transport, "fi_recvmsg", err)
	}
	return n, nil
}

// Poll reads completions into events in one call into C, which also
// progresses the provider (tcp and shm move data only while polled). Each
// event's kind comes from the completion flags; an error completion keeps
// the op's Context and its errno, and DescribeError gives its text. An
// error completion whose flags name no operation has Kind 0: the engine
// recognises the op by its own bits in Context, which is returned as given.
func (d *Domain) Poll(events []rdma.Event) (int, error) {
	if d.ep == nil {
		return 0, errClosed
	}
	if len(events) == 0 {
		return 0, nil
	}
	n, err := d.ep.Poll(&events[0], len(events))
	if err != nil {
		return 0, callError(d.transport, "fi_cq_read", err)
	}
	if ne := d.ep.ErrorCount(); ne > 0 {
		for i := range ne {
			ce := d.ep.CompletionError(i)
			d.errs.add(errText{context: ce.Context, errno: int32(ce.Errno),
				provErrno: int32(ce.ProvErrno), text: ce.Text})
		}
	}
	return n, nil
}

// DescribeError turns an error completion into a *rdma.ProviderError,
// with fi_cq_strerror's text when the completion was one of the last 64
// errors this domain read. A timeout (FI_ETIMEDOUT) also wraps
// rdma.ErrTimeout; errors that say the peer's connection is gone (reset,
// refused, not connected, broken pipe, unreachable, timed out) also wrap
// rdma.ErrPeerLost. Events without Errno give nil.
func (d *Domain) DescribeError(ev rdma.Event) error {
	if ev.Errno == 0 {
		return nil
	}
	text, ok := d.errs.find(ev)
	if !ok {
		text = ofi.Errno(ev.Errno).Error()
	}
	if ev.Context == 0 && ev.Kind == 0 && d.provName == "shm" {
		text += shmNoOpNote
	}
	op := "completion"
	if ev.Kind != 0 {
		op = ev.Kind.String() + " completion"
	}
	e := ofi.Errno(ev.Errno)
	return &rdma.ProviderError{
		Provider:  providerLabel(d.transport),
		Op:        op,
		Errno:     int(ev.Errno),
		ProvErrno: int(ev.ProvErrno),
		Msg:       text,
		Timeout:   e == ofi.ETIMEDOUT,
		PeerLost:  peerLostErrno(e) || (d.socketErrnos() && peerLostErrno(ofi.Errno(ev.ProvErrno))),
	}
}

// shmNoOpNote explains shm's error completions that name no operation:
// shm writes them when a copy it makes itself fails (cross-memory attach
// into a peer that has exited, or into memory the target has unmapped,
// such as a region unregistered and freed: efa/doc.go, "Unregistered
// regions"), and writes no completion for the write it belonged to.
const shmNoOpNote = " (shm names no operation for it: a copy into a peer failed, its process gone or " +
	"the target memory unmapped, e.g. a region unregistered and freed; that write ends at its deadline)"

// socketErrnos reports whether the provider's prov_errno is a socket
// errno (tcp reports a cancelled op with the connection's errno there).
func (d *Domain) socketErrnos() bool {
	return strings.HasPrefix(d.provName, "tcp") || d.provName == "sockets"
}

// peerLostErrno reports whether a completion's errno blames the peer's
// connection rather than the op.
func peerLostErrno(e ofi.Errno) bool {
	switch e {
	case ofi.ECONNRESET, ofi.ECONNREFUSED, ofi.ECONNABORTED, ofi.ENOTCONN, ofi.EPIPE,
		ofi.EHOSTUNREACH, ofi.ENETUNREACH, ofi.ESHUTDOWN, ofi.ETIMEDOUT:
		return true
	}
	return false
}

// Providers that connect on first use (tcp;ofi_rxm) answer -FI_EAGAIN for
// as long as a connection cannot be made, which for a dead peer is
// forever; the contract wants every op either accepted or failed. So the
// domain remembers, per peer, when its posts started being refused; a
// peer none of whose posts was accepted for the whole connect timeout is
// declared unreachable, and from then on its ops fail as soon as they are
// refused, until one is accepted again.

// refused is called when the provider is busy at an op for peer. It returns
// nil while waiting is still reasonable, else the unreachable error.
func (d *Domain) refused(peer rdma.PeerID, op string) error {
	if _, dead := d.dead[peer]; dead {
		return d.unreachable(peer, op)
	}
	now := time.Now()
	since, ok := d.stalls[peer]
	if !ok {
		d.stalls[peer] = now
		return nil
	}
	if now.Sub(since) < d.connectTimeout {
		return nil
	}
	delete(d.stalls, peer)
	d.dead[peer] = struct{}{}
	return d.unreachable(peer, op)
}

func (d *Domain) unreachable(peer rdma.PeerID, op string) error {
	return &rdma.ProviderError{
		Provider: providerLabel(d.transport),
		Op:       op,
		Errno:    int(ofi.ETIMEDOUT),
		Msg:      fmt.Sprintf("peer %d refused every post for %v: unreachable", peer, d.connectTimeout),
		Timeout:  true,
		PeerLost: true,
	}
}

// accepted notes that an op to peer was accepted: the peer is reachable.
func (d *Domain) accepted(peer rdma.PeerID) {
	delete(d.stalls, peer)
	delete(d.dead, peer)
}
