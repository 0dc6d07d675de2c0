package verbs

import (
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// Poll reaps up to len(events) completions (one cgo call for the CQ), runs
// the connection handshake (datagrams, retransmissions, deadlines) and
// posts what connected peers hold. Incoming writes with immediate come
// back as EventImm; their zero-length receives are re-posted in C.
func (d *Domain) Poll(events []rdma.Event) (int, error) {
	if d.closed {
		return 0, rdma.ErrClosed
	}
	n := d.drainPending(events)
	if n < len(events) {
		nev, nud, err := d.dom.Poll(unsafe.SliceData(events[n:]), len(events)-n, d.ud[:])
		if err != nil {
			return n, wrapErr("poll", err)
		}
		n += nev
		if k := d.dom.TakeErrQPs(d.errQPs[:]); k > 0 {
			d.recoverQPs(d.errQPs[:k])
		}
		if nud > 0 {
			now := time.Now()
			for i := range nud {
				d.onDatagram(d.ud[i].Bytes(), now)
			}
		}
	}
	if d.hs.connecting > 0 {
		d.hs.tick(time.Now())
	}
	if len(d.backlog) > 0 {
		d.flushBacklog()
	}
	if n < len(events) && len(d.pending) > 0 {
		n += d.drainPending(events[n:])
	}
	return n, nil
}

func (d *Domain) drainPending(events []rdma.Event) int {
	if len(d.pending) == 0 {
		return 0
	}
	n := copy(events, d.pending)
	d.pending = d.pending[:copy(d.pending, d.pending[n:])]
	return n
}

// onDatagram hands one handshake message to the state machine. Garbage,
// messages for another address and answers from unknown peers are dropped.
func (d *Domain) onDatagram(b []byte, now time.Time) {
	m, err := parseHsMsg(b)
	if err != nil || m.To != d.self {
		d.hs.staleDiscarded++
		return
	}
	id, ok := d.byAddr[m.From.key()]
	if !ok {
		if m.Type != hsReq || m.From.Link != d.self.Link {
			d.hs.staleDiscarded++
			return
		}
		id = d.newPeer(m.From)
	}
	if d.peers[id].self {
		return
	}
	d.hs.receive(id, &m, now)
}

// DescribeError turns an Event with Errno set into an error wrapping
// rdma.ErrProvider, and rdma.ErrTimeout for handshake deadlines.
func (d *Domain) DescribeError(ev rdma.Event) error { return describeEvent(ev) }
