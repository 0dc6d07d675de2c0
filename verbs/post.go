package verbs

import (
	"fmt"
	"syscall"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ibv"
)

// busy reports whether a post stopped for lack of room (send queue full,
// no free slot), which the engine retries after the next Poll.
func busy(e ibv.Errno) bool {
	return e == ibv.Errno(syscall.ENOMEM) || e == ibv.Errno(syscall.EAGAIN)
}

// full counts a busy stop by its cause and reports whether e was one.
func (d *Domain) full(e ibv.Errno) bool {
	switch e {
	case ibv.Errno(syscall.ENOMEM):
		d.sqFull++
	case ibv.Errno(syscall.EAGAIN):
		d.slotsFull++
	default:
		return false
	}
	return true
}

func (d *Domain) judgeWrite(op *rdma.WriteOp) verdict {
	if !validWrite(op) || int(op.Peer) >= len(d.peers) {
		return badOp
	}
	p := d.peers[op.Peer]
	if p.ready && len(p.heldW) == 0 {
		return postNow
	}
	return holdOp
}

func postAll(*rdma.WriteOp) verdict { return postNow }

func (d *Domain) badWrite(op *rdma.WriteOp) error {
	if int(op.Peer) >= len(d.peers) {
		return fmt.Errorf("verbs: write to unknown peer %d: %w", op.Peer, rdma.ErrInvalidArgument)
	}
	return fmt.Errorf("verbs: write of %d bytes from %#x: %w", op.Length, op.Local, rdma.ErrInvalidArgument)
}

// PostWrites posts ops as chains of up to four work requests per doorbell
// (consecutive ops to the same peer), one cgo call per batch. Ops to a peer
// that is still connecting are copied and held. It stops, returning how
// many ops it took, when the send queue or the slot table is full; an error
// with it means ops[n] is invalid (bad length, unknown peer).
func (d *Domain) PostWrites(ops []rdma.WriteOp) (int, error) {
	if d.closed {
		return 0, rdma.ErrClosed
	}
	i := 0
	for i < len(ops) {
		nseg, covered, v := planWrites(ops[i:], d.segs[:], d.judgeW)
		if nseg > 0 {
			n, e := d.dom.PostWrites(unsafe.SliceData(ops[i:]), d.segs[:nseg])
			i += n
			if e != 0 {
				if d.full(e) {
					return i, nil
				}
				return i, wrapErr("post writes", &ibv.OpError{Op: "ibv_post_send", Errno: e})
			}
			if n < covered {
				return i, nil
			}
		}
		if i == len(ops) {
			break
		}
		switch v {
		case holdOp:
			d.holdWrite(&ops[i])
			i++
		case badOp:
			return i, d.badWrite(&ops[i])
		}
	}
	return i, nil
}

func (d *Domain) holdWrite(op *rdma.WriteOp) {
	p := d.peers[op.Peer]
	p.heldW = append(p.heldW, *op)
	if p.ready {
		d.enqueueBacklog(op.Peer)
		return
	}
	d.connect(op.Peer)
}

// PostSends posts two-sided sends on the peers' message queue pairs.
func (d *Domain) PostSends(ops []rdma.SendOp) (int, error) {
	if d.closed {
		return 0, rdma.ErrClosed
	}
	i := 0
	for i < len(ops) {
		j := i
		for ; j < len(ops); j++ {
			op := &ops[j]
			if !validLength(op.Length) || int(op.Peer) >= len(d.peers) {
				break
			}
			if p := d.peers[op.Peer]; !p.ready || len(p.heldS) > 0 {
				break
			}
		}
		if j > i {
			n, e := d.dom.PostSends(unsafe.SliceData(ops[i:j]), j-i)
			i += n
			if e != 0 {
				if d.full(e) {
					return i, nil
				}
				return i, wrapErr("post sends", &ibv.OpError{Op: "ibv_post_send", Errno: e})
			}
		}
		if i == len(ops) {
			break
		}
		op := &ops[i]
		if !validLength(op.Length) || int(op.Peer) >= len(d.peers) {
			return i, fmt.Errorf("verbs: send of %d bytes to peer %d: %w", op.Length, op.Peer, rdma.ErrInvalidArgument)
		}
		p := d.peers[op.Peer]
		p.heldS = append(p.heldS, *op)
		if p.ready {
			d.enqueueBacklog(op.Peer)
		} else {
			d.connect(op.Peer)
		}
		i++
	}
	return i, nil
}

// PostRecvs posts receive buffers on the message SRQ, shared by all peers.
func (d *Domain) PostRecvs(ops []rdma.RecvOp) (int, error) {
	if d.closed {
		return 0, rdma.ErrClosed
	}
	for i := range ops {
		if !validLength(ops[i].Length) {
			n, e := d.dom.PostRecvs(unsafe.SliceData(ops), i)
			if e != 0 && !busy(e) {
				return n, wrapErr("post receives", &ibv.OpError{Op: "ibv_post_srq_recv", Errno: e})
			}
			if n < i {
				return n, nil
			}
			return i, fmt.Errorf("verbs: receive of %d bytes: %w", ops[i].Length, rdma.ErrInvalidArgument)
		}
	}
	n, e := d.dom.PostRecvs(unsafe.SliceData(ops), len(ops))
	if e != 0 && !busy(e) {
		return n, wrapErr("post receives", &ibv.OpError{Op: "ibv_post_srq_recv", Errno: e})
	}
	return n, nil
}

// flushBacklog posts what connected peers still hold, in order, until the
// queues are full.
func (d *Domain) flushBacklog() {
	k := 0
	for idx, id := range d.backlog {
		p := d.peers[id]
		if !p.ready {
			p.queued = false // re-queued when it connects
			continue
		}
		full := false
		for len(p.heldW) > 0 && !full {
			nseg, covered, _ := planWrites(p.heldW, d.segs[:], postAll)
			n, e := d.dom.PostWrites(unsafe.SliceData(p.heldW), d.segs[:nseg])
			p.heldW = p.heldW[:copy(p.heldW, p.heldW[n:])]
			if e != 0 && !busy(e) {
				d.failHeldWrite(p, e)
			}
			full = e != 0 || n < covered
		}
		for len(p.heldS) > 0 && !full {
			n, e := d.dom.PostSends(unsafe.SliceData(p.heldS), len(p.heldS))
			p.heldS = p.heldS[:copy(p.heldS, p.heldS[n:])]
			if e != 0 && !busy(e) && len(p.heldS) > 0 {
				d.pending = append(d.pending, rdma.Event{Kind: rdma.EventSend, Context: p.heldS[0].Context,
					Errno: int32(e), ProvErrno: 0})
				p.heldS = p.heldS[:copy(p.heldS, p.heldS[1:])]
			}
			full = e != 0
		}
		if len(p.heldW)+len(p.heldS) == 0 {
			p.queued = false
			continue
		}
		d.backlog[k] = id
		k++
		if full {
			k += copy(d.backlog[k:], d.backlog[idx+1:])
			break
		}
	}
	d.backlog = d.backlog[:k]
}

// failHeldWrite fails the first held write of p, which the provider refused
// for good, so the rest can go on.
func (d *Domain) failHeldWrite(p *peer, e ibv.Errno) {
	if len(p.heldW) == 0 {
		return
	}
	d.pending = append(d.pending, rdma.Event{Kind: rdma.EventWrite, Context: p.heldW[0].Context, Errno: int32(e)})
	p.heldW = p.heldW[:copy(p.heldW, p.heldW[1:])]
}
