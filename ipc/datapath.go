package ipc

import "github.com/ferryrdma/ferry/fabric/rdma"

// The data path. A write is done by the initiator's worker in PostWrites:
// it copies the bytes into its mapping of the target's region, then
// writes the immediate into the connection's ring and publishes it. The
// target's worker only drains immediates and messages in Poll; no thread
// of the target touches the bytes. A write that cannot run yet (the
// connection or the region's mapping is still being set up, the ring is
// full) is held per peer, in order, and retried from Poll: a slow target
// never holds up writes to the others.

// publishNowBytes: an immediate after a write this large is published at
// once instead of at the end of the batch, so the target does not wait
// for the copies of the writes behind it.
const publishNowBytes = 64 << 10

// evQueue holds completions until Poll hands them out.
type evQueue struct {
	buf  []rdma.Event
	head int
}

func (q *evQueue) push(ev rdma.Event) { q.buf = append(q.buf, ev) }

func (q *evQueue) pending() bool { return q.head < len(q.buf) }

func (q *evQueue) drain(out []rdma.Event) int {
	n := copy(out, q.buf[q.head:])
	q.head += n
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
	return n
}

func (d *Domain) complete(op *rdma.WriteOp, errno int32) {
	d.done.push(rdma.Event{Kind: rdma.EventWrite, Context: op.Context, Errno: errno})
}

// PostWrites accepts every op: each completes through Poll, at once or
// after it was held.
func (d *Domain) PostWrites(ops []rdma.WriteOp) (int, error) {
	if d.closed.Load() {
		return 0, errClosed
	}
	for i := range ops {
		op := &ops[i]
		if uint64(op.Peer) >= uint64(len(d.peers)) {
			d.complete(op, errnoInvalid)
			continue
		}
		p := d.peers[op.Peer]
		if p.heldHead < len(p.heldOps) || !d.exec(p, op) {
			p.heldOps = append(p.heldOps, *op)
			if !p.isHeld {
				p.isHeld = true
				d.held = append(d.held, p)
			}
		}
	}
	d.endBatch()
	return len(ops), nil
}

// exec performs op, or reports false when it must wait.
func (d *Domain) exec(p *outPeer, op *rdma.WriteOp) bool {
	switch p.state.Load() {
	case peerConnecting:
		return false
	case peerDead:
		d.complete(op, p.deadErrno())
		return true
	}
	if p.prod.pg == nil {
		p.prod.pg, p.prod.wake = p.page, p.wakeFD
	}
	imm := op.Flags&rdma.WriteHasImm != 0
	if imm && !p.prod.immRoom() {
		return false
	}
	if op.Length > 0 {
		m := p.last
		if m == nil || m.key != op.RemoteKey {
			m = p.maps[op.RemoteKey]
			if m == nil || m.pending {
				d.requestMap(p, op.RemoteKey, m)
				return false
			}
			if m.errno != 0 {
				d.complete(op, m.errno)
				return true
			}
			p.last = m
		}
		if d.cur != m {
			d.release()
			if !m.acquire() {
				d.complete(op, revokedErrno(p))
				return true
			}
			d.cur = m
		}
		if op.Remote > m.length || op.Length > m.length-op.Remote {
			d.complete(op, errnoAccess)
			return true
		}
		if op.Flags&rdma.WriteRead != 0 {
			return d.read(m, op)
		}
		d.job.copyMem(m.base+uintptr(op.Remote), uintptr(op.Local), op.Length)
	}
	if imm {
		if !p.prod.dirty {
			d.dirty = append(d.dirty, p)
		}
		p.prod.pushImm(op.Imm)
		if op.Length >= publishNowBytes {
			p.prod.publish()
		}
	}
	d.complete(op, 0)
	return true
}

// revokedErrno tells why a mapping was revoked: the target unregistered
// the region (ENOKEY), or it is gone.
func revokedErrno(p *outPeer) int32 {
	if p.state.Load() == peerDead {
		return p.deadErrno()
	}
	return errnoNoKey
}

// requestMap asks the target for a region's file, once; the answer comes
// to the reader goroutine, and ops wait meanwhile.
func (d *Domain) requestMap(p *outPeer, key uint64, m *mapping) {
	if m == nil {
		m = &mapping{key: key, pending: true}
		p.maps[key] = m
	}
	if m.sent {
		return
	}
	sent, err := p.c.trySend(ctlMsg{kind: ctlMapReq, key: key})
	if err != nil {
		p.c.close() // the reader sees it and marks the peer dead
		return
	}
	m.sent = sent
}

// endBatch publishes the immediates of this batch and lets go of the
// mapping held for it.
func (d *Domain) endBatch() {
	for _, p := range d.dirty {
		p.prod.publish()
	}
	clear(d.dirty)
	d.dirty = d.dirty[:0]
	d.release()
}

func (d *Domain) release() {
	if d.cur != nil {
		d.cur.release()
		d.cur = nil
	}
}

// PostSends writes each message into the peer's message ring; a full ring
// or a connection still being set up makes the domain busy.
func (d *Domain) PostSends(ops []rdma.SendOp) (int, error) {
	if d.closed.Load() {
		return 0, errClosed
	}
	for i := range ops {
		op := &ops[i]
		ev := rdma.Event{Kind: rdma.EventSend, Context: op.Context}
		switch {
		case uint64(op.Peer) >= uint64(len(d.peers)):
			ev.Errno = errnoInvalid
		case op.Length > MaxMessage:
			ev.Errno = errnoMsgSize
		default:
			p := d.peers[op.Peer]
			switch p.state.Load() {
			case peerConnecting:
				return i, nil
			case peerDead:
				ev.Errno = p.deadErrno()
			default:
				if p.prod.pg == nil {
					p.prod.pg, p.prod.wake = p.page, p.wakeFD
				}
				if !p.prod.pushMsg(bytesAt(uintptr(op.Local), op.Length)) {
					return i, nil
				}
			}
		}
		d.done.push(ev)
	}
	return len(ops), nil
}

// PostRecvs queues receive buffers; messages fill them in order.
func (d *Domain) PostRecvs(ops []rdma.RecvOp) (int, error) {
	if d.closed.Load() {
		return 0, errClosed
	}
	d.recvs = append(d.recvs, ops...)
	return len(ops), nil
}

// Poll applies what the control goroutines left, retries held writes,
// and returns local completions, then immediates and messages from the
// incoming connections (taken round-robin, so none starves).
func (d *Domain) Poll(events []rdma.Event) (int, error) {
	if d.closed.Load() {
		return 0, errClosed
	}
	if d.changed.Load() {
		d.applyChanges()
	}
	if len(d.held) > 0 {
		d.retryHeld()
	}
	n := d.done.drain(events)
	if n < len(events) && len(d.conns) > 0 {
		n += d.pollConns(events[n:])
	}
	return n, nil
}

func (d *Domain) retryHeld() {
	for i := 0; i < len(d.held); {
		p := d.held[i]
		for p.heldHead < len(p.heldOps) && d.exec(p, &p.heldOps[p.heldHead]) {
			p.heldHead++
		}
		if p.heldHead < len(p.heldOps) {
			i++
			continue
		}
		p.heldOps, p.heldHead, p.isHeld = p.heldOps[:0], 0, false
		last := len(d.held) - 1
		d.held[i] = d.held[last]
		d.held[last] = nil
		d.held = d.held[:last]
	}
	d.endBatch()
}

func (d *Domain) pollConns(events []rdma.Event) int {
	n, k, remove := 0, len(d.conns), false
	for i := 0; i < k && n < len(events); i++ {
		c := d.conns[(d.rr+i)%k]
		if c.gone {
			continue
		}
		// dead is read before the tail: everything a dead initiator
		// published is then in view.
		dead := c.dead.Load()
		avail, ok := c.cons.pendingImm()
		if !ok {
			d.broken(c)
			continue
		}
		take := min(avail, uint64(len(events)-n))
		for j := uint64(0); j < take; j++ {
			events[n] = rdma.Event{Kind: rdma.EventImm, Imm: c.cons.takeImm()}
			n++
		}
		if take > 0 {
			c.cons.releaseImm()
		}
		for d.recvHead < len(d.recvs) && n < len(events) {
			ln, ok, bad := c.cons.peekMsg()
			if bad {
				d.broken(c)
				break
			}
			if !ok {
				break
			}
			r := &d.recvs[d.recvHead]
			d.recvHead++
			ev := rdma.Event{Kind: rdma.EventRecv, Context: r.Context, Length: ln}
			if ln > r.Length {
				ev.Errno = errnoMsgSize
			}
			c.cons.takeMsg(bytesAt(uintptr(r.Local), r.Length), ln)
			events[n] = ev
			n++
		}
		if take == avail && !c.gone && dead {
			// Everything the initiator published before it went is
			// delivered; its unclaimed messages go with it.
			c.gone = true
			remove = true
		}
	}
	if d.recvHead == len(d.recvs) {
		d.recvs, d.recvHead = d.recvs[:0], 0
	}
	d.rr++
	if remove {
		d.removeGone()
	}
	return n
}

// broken stops reading a page whose producer published impossible
// indexes, and closes the connection (the initiator sees it as our end
// gone).
func (d *Domain) broken(c *inConn) {
	c.gone = true
	c.c.close()
}

func (d *Domain) removeGone() {
	keep := d.conns[:0]
	for _, c := range d.conns {
		if c.gone && c.dead.Load() {
			c.dropPage()
			continue
		}
		keep = append(keep, c)
	}
	clear(d.conns[len(keep):])
	d.conns = keep
}

// applyChanges adopts new incoming connections and takes in what the
// outgoing readers left: region mappings, revocations, dead peers.
func (d *Domain) applyChanges() {
	d.changed.Store(false)
	d.mu.Lock()
	d.conns = append(d.conns, d.newConns...)
	clear(d.newConns)
	d.newConns = d.newConns[:0]
	d.mu.Unlock()
	for _, c := range d.conns {
		if c.gone && c.dead.Load() {
			d.removeGone()
			break
		}
	}
	for _, p := range d.peers {
		if p.news.Load() {
			d.applyPeer(p)
		}
	}
}

func (d *Domain) applyPeer(p *outPeer) {
	p.news.Store(false)
	p.mu.Lock()
	replies, dropped := p.replies, p.dropped
	p.replies, p.dropped = nil, nil
	p.mu.Unlock()
	for _, m := range replies {
		p.maps[m.key] = m
		if p.last != nil && p.last.key == m.key {
			p.last = nil
		}
	}
	for _, m := range dropped {
		if p.maps[m.key] == m {
			delete(p.maps, m.key)
		}
		if p.last == m {
			p.last = nil
		}
	}
	if p.state.Load() == peerDead {
		for ; p.heldHead < len(p.heldOps); p.heldHead++ {
			d.complete(&p.heldOps[p.heldHead], p.deadErrno())
		}
		clear(p.maps)
		p.last = nil
		p.dropPage()
	}
}
