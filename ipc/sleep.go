package ipc

import (
	"github.com/ferryrdma/ferry/fabric/rdma"
	"golang.org/x/sys/unix"
)

// A domain is a rdma.Sleeper: its worker may sleep while no initiator
// writes, and be woken by the first that does, instead of finding the
// immediate at the end of its sleep. Before sleeping, the worker marks
// every incoming connection's page "sleeping" and looks at the rings once
// more; an initiator that publishes into a page marked so clears the mark
// and signals the domain's eventfd, which the worker waits on. The
// domain's own goroutines signal it too when they leave the worker
// something (a new connection, a mapping, a peer gone).
var _ rdma.Sleeper = (*Domain)(nil)

// WakeFD is the eventfd peers signal.
func (d *Domain) WakeFD() int { return d.evfd }

// PrepareSleep marks the incoming pages; false when work already waits.
func (d *Domain) PrepareSleep() bool {
	if d.changed.Load() || d.done.pending() {
		return false
	}
	for _, c := range d.conns {
		if !c.gone {
			c.page.hdr.sleeping.Store(1)
		}
	}
	for _, c := range d.conns {
		if !c.gone && d.hasWork(c) {
			d.Awake()
			return false
		}
	}
	return true
}

// hasWork reports immediates, or messages a posted receive can take.
func (d *Domain) hasWork(c *inConn) bool {
	h := c.page.hdr
	if h.immTail.Load() != c.cons.immHead {
		return true
	}
	return d.recvHead < len(d.recvs) && h.msgTail.Load() != c.cons.msgHead
}

// Awake clears the marks and the eventfd.
func (d *Domain) Awake() {
	for _, c := range d.conns {
		if !c.gone {
			c.page.hdr.sleeping.Store(0)
		}
	}
	var b [8]byte
	_, _ = unix.Read(d.evfd, b[:])
}

// wakeWorker tells the worker the goroutines left it something.
func (d *Domain) wakeWorker() {
	d.changed.Store(true)
	_, _ = unix.Write(d.evfd, eventOne[:])
}
