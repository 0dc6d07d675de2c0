package ipc

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/shm"
)

// inConn is a connection from an initiator: this domain is its target.
// Its reader goroutine answers requests; the worker drains its page.
type inConn struct {
	d     *Domain
	c     *ctlConn
	pid   int
	page  *connPage // set by the reader before the worker sees the conn
	cons  consumer  // worker-owned
	dead  atomic.Bool
	acked atomic.Uint64 // the last revocation the initiator acknowledged
	gone  bool          // worker: no longer polled; dropped once dead
}

func (c *inConn) dropPage() {
	if c.page != nil {
		unmap(c.page.mem)
		c.page = nil
		c.cons.pg = nil
	}
}

// Outgoing peer states.
const (
	peerConnecting int32 = iota
	peerReady
	peerDead
)

// outPeer is a connection to a target. Its reader goroutine maps what the
// target sends (connection page, regions) and unmaps what it revokes.
type outPeer struct {
	d     *Domain
	ea    endpointAddr
	addr  rdma.Address // as resolved, with its incarnation
	c     *ctlConn
	pid   int // of the process at the other end, 0 when unknown
	state atomic.Int32
	// ended is set, before the state turns dead, when the process at the
	// other end was found exiting (processEnded): a connection still being
	// set up then never turns ready.
	ended atomic.Bool
	// bye is set, before the state turns dead, when the target said it
	// closes its domain: an orderly end, not a loss.
	bye    atomic.Bool
	page   *connPage // set by the reader before state becomes peerReady
	wakeFD int       // the target's wake eventfd, set with page; the worker closes it
	news   atomic.Bool

	mu        sync.Mutex // the reader's mailbox
	replies   []*mapping
	dropped   []*mapping          // revoked mappings the worker should forget
	installed map[uint64]*mapping // mapped by the reader, by key

	// Worker-owned.
	prod     producer
	maps     map[uint64]*mapping // by key: requested, mapped or refused
	last     *mapping
	heldOps  []rdma.WriteOp
	heldHead int
	isHeld   bool
	pageGone bool
}

// deadErrno is the error of ops to a dead peer: it closed its domain in
// order, or it is gone.
func (p *outPeer) deadErrno() int32 {
	if p.bye.Load() {
		return errnoPeerClosed
	}
	return errnoPeerGone
}

// processGone marks the peer dead because its process is exiting, from
// the reader of another connection to that process; this one's own
// reader retires the mappings when it sees its connection end.
func (p *outPeer) processGone() {
	if p.c.peekBye() {
		// The process closed this domain in order before it exited; this
		// connection's reader has not got to the bye yet.
		p.bye.Store(true)
	}
	p.ended.Store(true)
	if p.state.CompareAndSwap(peerReady, peerDead) {
		p.news.Store(true)
		p.d.wakeWorker()
	}
}

func (p *outPeer) dropPage() {
	if p.page != nil && !p.pageGone {
		p.pageGone = true
		unmap(p.page.mem)
		_ = unix.Close(p.wakeFD)
		p.prod.pg = nil
	}
}

// mapping is a target's region mapped into this process. users counts
// copies in progress; the reader sets revoked, waits for users to reach
// zero, then unmaps. A copier increments users before it checks revoked
// (both sequentially consistent), so one of the two always sees the other.
type mapping struct {
	key     uint64
	seg     *segment
	base    uintptr // the region's first byte
	length  uint64
	users   atomic.Int32
	revoked atomic.Bool
	errno   int32 // the target refused the request (worker reads after hand-off)
	// readable: the target registered the region with remote read; the
	// initiator refuses reads of other regions (the target trusts its
	// peers' library for that, as it trusts them with its keys).
	readable bool
	pending  bool // worker: requested, no answer yet
	sent     bool // worker: the request went out
}

func (m *mapping) acquire() bool {
	m.users.Add(1)
	if m.revoked.Load() {
		m.users.Add(-1)
		return false
	}
	return true
}

func (m *mapping) release() { m.users.Add(-1) }

// retire keeps every later copy out of m, waits for the ones running (a
// large one takes milliseconds: the wait sleeps rather than spin on a core
// the copy could use), and lets go of its segment.
func (m *mapping) retire() {
	m.revoked.Store(true)
	for pause := time.Microsecond; m.users.Load() != 0; pause = min(2*pause, 100*time.Microsecond) {
		time.Sleep(pause)
	}
	m.seg.release()
	m.seg = nil
}

func (d *Domain) runAccept() {
	defer d.wg.Done()
	for {
		uc, err := d.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(time.Millisecond) // EMFILE and the like: let descriptors free up
			continue
		}
		c, err := newCtlConn(uc)
		var pid int
		if err == nil {
			pid, err = c.checkPeer()
		}
		if err != nil {
			_ = uc.Close()
			continue
		}
		ic := &inConn{d: d, c: c, pid: pid}
		d.mu.Lock()
		if d.closing {
			d.mu.Unlock()
			c.close()
			continue
		}
		d.incoming[ic] = struct{}{}
		d.wg.Add(1)
		d.mu.Unlock()
		go d.runIncoming(ic)
	}
}

// runIncoming serves one initiator until its connection ends.
func (d *Domain) runIncoming(c *inConn) {
	defer d.wg.Done()
	defer func() {
		c.c.close()
		d.mu.Lock()
		delete(d.incoming, c)
		for _, r := range d.regions {
			delete(r.mappedBy, c)
		}
		d.mu.Unlock()
		c.dead.Store(true)
		d.wakeWorker()
		// An initiator that died may also be a target of this process.
		processEnded(c.pid, nil)
	}()
	hello := false
	for {
		m, fds, err := c.c.recv()
		if err != nil {
			return
		}
		if len(fds) > 0 { // initiators never send files
			shm.CloseAll(fds)
			return
		}
		switch {
		case m.kind == ctlHello && !hello:
			hello = true
			if m.a != ctlVersion || !d.accept(c) {
				return
			}
		case m.kind == ctlMapReq && hello:
			if !d.serveMap(c, m) {
				return
			}
		case m.kind == ctlRevokeAck && hello:
			if m.seq > c.acked.Load() {
				c.acked.Store(m.seq)
			}
		default:
			return
		}
	}
}

// accept creates the connection's page, sends it, and hands the
// connection to the worker.
func (d *Domain) accept(c *inConn) bool {
	fd, err := newMemfd("ferry-ipc-conn", connPageLen)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	mem, err := mapFile(fd, 0, connPageLen, 0)
	if err != nil {
		return false
	}
	c.page = viewPage(mem)
	c.page.init()
	c.cons.pg = c.page
	if c.c.send(ctlMsg{kind: ctlHelloAck, a: connPageLen, b: immCap, c: msgCap}, fd, d.evfd) != nil {
		c.dropPage()
		return false
	}
	d.mu.Lock()
	d.newConns = append(d.newConns, c)
	d.mu.Unlock()
	d.wakeWorker()
	return true
}

// serveMap answers a request for a region's file. The lock keeps an
// unregistration from slipping between the lookup and recording that c
// was sent the file.
func (d *Domain) serveMap(c *inConn, m ctlMsg) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.regions[m.key]
	if r == nil {
		return c.c.send(ctlMsg{kind: ctlMapAck, seq: m.seq, key: m.key, status: errnoNoKey}) == nil
	}
	// A file of huge pages maps only at multiples of its page size.
	align := max(pageSize, r.file.PageSize)
	start := r.file.Offset &^ (align - 1)
	end := (r.file.Offset + r.length + align - 1) &^ (align - 1)
	ack := ctlMsg{kind: ctlMapAck, seq: m.seq, key: m.key, a: start, b: end - start, c: r.file.Offset - start, d: r.length}
	if r.readable {
		ack.status = ackReadable
	}
	if err := c.c.send(ack, r.file.FD); err != nil {
		return false
	}
	r.mappedBy[c] = struct{}{}
	return true
}

// readerEndHook, set by tests, runs first when an outgoing connection's
// reader ends: a test holds one back to see what the others do meanwhile.
var readerEndHook atomic.Pointer[func(*outPeer)]

// runOutgoing reads the target's answers until the connection ends, then
// unmaps every region of the target and marks the peer dead.
func (d *Domain) runOutgoing(p *outPeer) {
	defer d.wg.Done()
	defer func() {
		if hook := readerEndHook.Load(); hook != nil {
			(*hook)(p)
		}
		p.c.close()
		// The process's other endpoints are dead before this one, so that
		// whoever learns from this one that the peer is gone finds them
		// gone too (see process.go).
		if processEnded(p.pid, p) {
			p.ended.Store(true)
		}
		// Dead before the mappings are revoked: a copier that finds one
		// revoked then also finds the peer dead, and reports that.
		p.state.Store(peerDead)
		p.mu.Lock()
		for k, m := range p.installed {
			m.retire()
			delete(p.installed, k)
		}
		p.mu.Unlock()
		// Out of the registry before the domain can close (wg.Done runs
		// last): nobody signals this domain's eventfd after.
		removePeerProcess(p)
		p.news.Store(true)
		d.wakeWorker()
	}()
	for {
		m, fds, err := p.c.recv()
		if err != nil {
			return
		}
		ok := true
		switch {
		case m.kind == ctlHelloAck && p.state.Load() == peerConnecting && len(fds) == 2:
			ok = p.connected(m, fds[0], fds[1])
			fds = fds[:1] // the wake eventfd is the peer's now
		case m.kind == ctlMapAck && p.state.Load() == peerReady && len(fds) <= 1:
			fd := -1
			if len(fds) == 1 {
				fd = fds[0]
			}
			p.mapped(m, fd)
		case m.kind == ctlBye && len(fds) == 0:
			p.bye.Store(true)
			ok = false // the connection ends here, in order
		case m.kind == ctlRevoke && len(fds) == 0:
			p.revoke(m.key)
			ok = p.c.send(ctlMsg{kind: ctlRevokeAck, seq: m.seq, key: m.key}) == nil
		default:
			ok = false
		}
		shm.CloseAll(fds)
		if !ok {
			return
		}
	}
}

// connected maps the connection page and keeps the target's wake
// eventfd (closing it if the page is refused).
func (p *outPeer) connected(m ctlMsg, fd, wake int) bool {
	if m.a != connPageLen || m.b != immCap || m.c != msgCap {
		_ = unix.Close(wake)
		return false
	}
	mem, err := mapFile(fd, 0, connPageLen, connPageLen)
	if err != nil {
		_ = unix.Close(wake)
		return false
	}
	pg := viewPage(mem)
	if !pg.valid() {
		unmap(mem)
		_ = unix.Close(wake)
		return false
	}
	p.page, p.wakeFD = pg, wake
	p.state.Store(peerReady)
	if p.ended.Load() {
		// Its process was found exiting meanwhile (processGone saw the
		// peer still connecting, or will see it ready: either way dead).
		p.state.CompareAndSwap(peerReady, peerDead)
	}
	p.news.Store(true)
	p.d.wakeWorker()
	return true
}

// mapped maps the region a mapAck describes (or records the refusal) and
// leaves it for the worker.
func (p *outPeer) mapped(m ctlMsg, fd int) {
	mp := &mapping{key: m.key, errno: int32(m.status &^ ackReadable), readable: m.status&ackReadable != 0}
	if mp.errno == 0 {
		if fd < 0 || m.c > m.b || m.d > m.b-m.c {
			mp.errno = errnoProtocol
		} else if seg, err := mapSegment(p.ea, fd, m.a, m.b, m.a+m.c+m.d); err != nil {
			mp.errno = errnoNotSharing
		} else {
			mp.seg, mp.length = seg, m.d
			mp.base = uintptr(unsafeAddr(seg.mem)) + uintptr(m.c)
		}
	}
	p.mu.Lock()
	if mp.errno == 0 {
		if old := p.installed[m.key]; old != nil { // answered twice: keep one mapping
			old.retire()
		}
		p.installed[m.key] = mp
	}
	p.replies = append(p.replies, mp)
	p.mu.Unlock()
	p.news.Store(true)
	p.d.wakeWorker()
}

func (p *outPeer) revoke(key uint64) {
	p.mu.Lock()
	m := p.installed[key]
	delete(p.installed, key)
	if m != nil {
		m.retire()
		p.dropped = append(p.dropped, m)
	}
	p.mu.Unlock()
	if m != nil {
		p.news.Store(true)
		p.d.wakeWorker()
	}
}
