package verbs

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ibv"
)

// ResolvePeer returns the peer id for addr and starts connecting to it if
// that is not under way: it never waits. Ops posted to the peer meanwhile
// are held by the domain and posted once it is connected, or fail with a
// timeout at DomainOptions.HandshakeTimeout.
func (d *Domain) ResolvePeer(addr rdma.Address) (rdma.PeerID, error) {
	if d.closed {
		return 0, rdma.ErrClosed
	}
	a, err := parseUDAddr([]byte(addr.RawString()))
	if err != nil {
		return 0, err
	}
	if a.Link != d.self.Link {
		return 0, fmt.Errorf("verbs: peer %v is on %v, this domain on %v: %w", a, a.Link, d.self.Link, rdma.ErrInvalidArgument)
	}
	id, ok := d.byAddr[a.key()]
	if !ok {
		id = d.newPeer(a)
	}
	d.connect(id)
	return id, nil
}

func (d *Domain) newPeer(a udAddr) rdma.PeerID {
	id := rdma.PeerID(len(d.peers))
	d.peers = append(d.peers, &peer{addr: a, self: a == d.self})
	d.byAddr[a.key()] = id
	return id
}

// connect starts the handshake with id, or for the domain's own address
// connects each queue pair to itself, which needs no messages.
func (d *Domain) connect(id rdma.PeerID) {
	p := d.peers[id]
	if !p.self {
		d.hs.start(id, time.Now())
		return
	}
	if p.ready {
		return
	}
	info, err := d.createQPs(id)
	if err == nil {
		err = d.connectQPs(id, info)
	}
	if err != nil {
		d.resetQPs(id)
		d.failed(id, err)
		return
	}
	d.established(id)
}

// The methods below are the handshake's environment (hsEnv).

func (d *Domain) createQPs(id rdma.PeerID) (qpInfo, error) {
	p := d.peers[id]
	msg, err := d.dom.CreateRCQP(false, d.sqDepth)
	if err != nil {
		return qpInfo{}, wrapErr("create queue pair", err)
	}
	rma, err := d.dom.CreateRCQP(true, d.sqDepth)
	if err != nil {
		msg.Destroy()
		return qpInfo{}, wrapErr("create queue pair", err)
	}
	init := rcInitAttr(d.path.port)
	for _, q := range []ibv.QP{msg, rma} {
		if err := q.Modify(&init); err != nil {
			msg.Destroy()
			rma.Destroy()
			return qpInfo{}, wrapErr("connect", err)
		}
	}
	p.msg, p.rma = msg, rma
	d.qpOwner[msg.Num], d.qpOwner[rma.Num] = id, id
	p.local = qpInfo{Gen: rand.Uint32() | 1, MsgQPN: msg.Num, RMAQPN: rma.Num,
		MsgPSN: rand.Uint32() & 0xffffff, RMAPSN: rand.Uint32() & 0xffffff, MTU: d.path.mtu}
	return p.local, nil
}

func (d *Domain) connectQPs(id rdma.PeerID, r qpInfo) error {
	p := d.peers[id]
	for _, c := range []struct {
		q             ibv.QP
		qpn, rpsn, sp uint32
	}{{p.msg, r.MsgQPN, r.MsgPSN, p.local.MsgPSN}, {p.rma, r.RMAQPN, r.RMAPSN, p.local.RMAPSN}} {
		rtr := rcRTRAttr(d.path, p.addr, r.MTU, c.qpn, c.rpsn)
		if err := c.q.Modify(&rtr); err != nil {
			return wrapErr("connect", err)
		}
		rts := rcRTSAttr(c.sp)
		rts.MaxRdAtomic = max(1, d.path.rdAtomic)
		if err := c.q.Modify(&rts); err != nil {
			return wrapErr("connect", err)
		}
	}
	return nil
}

// resetQPs retires id's queue pairs: moved to ERR, their posted work comes
// back as flush completions. They are destroyed only at Close, because a
// destroy may discard completions still in the CQ (mlx5 cleans them), and
// every accepted op must report exactly once. A peer that reconnects k
// times keeps 2k retired pairs until then.
func (d *Domain) resetQPs(id rdma.PeerID) {
	p := d.peers[id]
	d.dom.SetPeer(uint32(id), ibv.QP{}, ibv.QP{})
	p.ready = false
	e := errAttr()
	for _, q := range []ibv.QP{p.msg, p.rma} {
		if q.Valid() {
			delete(d.qpOwner, q.Num)
			q.Modify(&e) // flushes its posted work as error completions
			d.retired = append(d.retired, q)
		}
	}
	p.msg, p.rma = ibv.QP{}, ibv.QP{}
}

func (d *Domain) send(id rdma.PeerID, m *hsMsg) {
	p := d.peers[id]
	if !p.ah.Valid() {
		ah, err := d.dom.CreateAH(p.addr.GID, p.addr.LID, d.path.global, d.path.sgidIndex, rcHopLimit)
		if err != nil {
			d.udSendErrors++
			return
		}
		p.ah = ah
	}
	m.From, m.To = d.self, p.addr
	if d.dropSend != nil && d.dropSend(m) {
		return
	}
	d.msgBuf = m.appendTo(d.msgBuf[:0])
	if err := d.dom.UDSend(p.ah, p.addr.QPN, d.msgBuf); err != nil {
		d.udSendErrors++ // the retransmission timer covers it
	}
}

func (d *Domain) established(id rdma.PeerID) {
	p := d.peers[id]
	if err := d.dom.SetPeer(uint32(id), p.msg, p.rma); err != nil {
		d.failed(id, wrapErr("connect", err))
		return
	}
	p.ready = true
	if len(p.heldW)+len(p.heldS) > 0 {
		d.enqueueBacklog(id)
	}
}

func (d *Domain) failed(id rdma.PeerID, err error) {
	p := d.peers[id]
	errno, prov := int32(syscall.ETIMEDOUT), int32(provErrHandshake)
	if !isTimeout(err) {
		errno, prov = int32(syscall.ECONNREFUSED), provErrConnect
	}
	for i := range p.heldW {
		d.pending = append(d.pending, rdma.Event{Kind: rdma.EventWrite, Context: p.heldW[i].Context,
			Errno: errno, ProvErrno: prov})
	}
	for i := range p.heldS {
		d.pending = append(d.pending, rdma.Event{Kind: rdma.EventSend, Context: p.heldS[i].Context,
			Errno: errno, ProvErrno: prov})
	}
	p.heldW, p.heldS = p.heldW[:0], p.heldS[:0]
}

// recoverQPs reconnects the peers whose current queue pairs reported an
// error completion. Errors on retired pairs (their flushes) are ignored.
func (d *Domain) recoverQPs(qpns []uint32) {
	now := time.Now()
	for _, qpn := range qpns {
		id, ok := d.qpOwner[qpn]
		if !ok {
			continue
		}
		if d.peers[id].self {
			d.hs.restarts++
			d.resetQPs(id)
			d.connect(id)
			continue
		}
		d.hs.restart(id, now)
	}
}

func (d *Domain) enqueueBacklog(id rdma.PeerID) {
	if p := d.peers[id]; !p.queued {
		p.queued = true
		d.backlog = append(d.backlog, id)
	}
}
