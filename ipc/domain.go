package ipc

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"golang.org/x/sys/unix"
)

// Domain is one ipc endpoint: a listening abstract unix socket, the
// regions it shares, its connections to targets (outgoing peers) and from
// initiators (incoming connections).
//
// Like every rdma.Domain it is driven by one worker goroutine. The
// goroutines it starts (the accept loop and one reader per connection)
// serve only the control protocol; they hand results to the worker
// through small mailboxes (a mutex and an atomic flag the worker checks
// once per Poll), never touching the data path.
type Domain struct {
	info rdma.DomainInfo
	ea   endpointAddr
	addr rdma.Address
	ln   *net.UnixListener
	evfd int            // wake eventfd: peers and our goroutines signal a sleeping worker
	wg   sync.WaitGroup // the accept loop and every connection reader

	mu       sync.Mutex // guards the fields below, shared with the goroutines
	closing  bool
	regions  map[uint64]*region // remote-writable registrations by key
	incoming map[*inConn]struct{}
	newConns []*inConn // accepted and set up, not yet seen by the worker

	changed atomic.Bool // a goroutine left something for the worker
	closed  atomic.Bool

	// Worker-owned.
	peers    []*outPeer
	peerOf   map[string]rdma.PeerID
	conns    []*inConn // incoming connections the worker polls
	held     []*outPeer
	dirty    []*outPeer // producers with unpublished immediates
	done     evQueue
	recvs    []rdma.RecvOp
	recvHead int
	job      copyJob
	cur      *mapping // the mapping held during this batch
	rr       int

	// Registration runs beside the worker (RegistrationMode): localRegs
	// is guarded by mu, revokeSeq by revokeMu.
	revokeMu  sync.Mutex
	revokeSeq uint64
	localRegs int
}

var _ rdma.Domain = (*Domain)(nil)

// liveRegs counts registrations not yet unregistered, across domains.
var liveRegs atomic.Int64

// LiveRegistrations returns how many registrations the ipc domains of this
// process hold: zero once every region was unregistered.
func LiveRegistrations() int64 { return liveRegs.Load() }

func open(info rdma.DomainInfo, incarnation uint64) (*Domain, error) {
	info.OrderedWrites = true // see domainInfo
	info.Reads = true
	d := &Domain{info: info, ea: newEndpointAddr(), regions: map[uint64]*region{},
		incoming: map[*inConn]struct{}{}, peerOf: map[string]rdma.PeerID{}}
	var err error
	if d.addr, err = rdma.NewAddress(d.ea.raw(), incarnation); err != nil {
		return nil, err
	}
	if d.evfd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return nil, fmt.Errorf("ipc: wake eventfd: %w", err)
	}
	d.ln, err = net.ListenUnix("unixpacket", &net.UnixAddr{Name: d.ea.socketName(), Net: "unixpacket"})
	if err != nil {
		_ = unix.Close(d.evfd)
		return nil, fmt.Errorf("ipc: listen on %s: %w", d.ea.socketName(), err)
	}
	d.job.calls = acquireHelpers()
	d.wg.Add(1)
	go d.runAccept()
	return d, nil
}

func (d *Domain) Info() rdma.DomainInfo { return d.info }
func (d *Domain) Address() rdma.Address { return d.addr }

// region is a remote-writable registration: the memory file behind it,
// kept open to hand to initiators that ask for its key.
type region struct {
	key      uint64
	file     rdma.HostFile
	length   uint64
	readable bool                 // registered with rdma.AccessRemoteRead
	mappedBy map[*inConn]struct{} // connections that were sent the file
}

// RegisterMemory registers host memory. Local-only spans may be any
// memory; remote-writable ones must lie in one fabric.AllocHost buffer
// (a memfd an initiator can map), else the error wraps
// rdma.ErrNotSupported. Remote addresses are offsets into the span.
func (d *Domain) RegisterMemory(s rdma.MemorySpan, a rdma.Access) (rdma.MemoryKeys, error) {
	if d.closed.Load() {
		return rdma.MemoryKeys{}, errClosed
	}
	if !s.Device.IsHost() {
		return rdma.MemoryKeys{}, fmt.Errorf("ipc: register %s memory: host memory only: %w", s.Device, rdma.ErrNotSupported)
	}
	if a&(rdma.AccessRemoteWrite|rdma.AccessRemoteRead) == 0 {
		d.mu.Lock()
		d.localRegs++
		d.mu.Unlock()
		liveRegs.Add(1)
		return rdma.MemoryKeys{Mode: rdma.AddrOffset}, nil
	}
	f, err := rdma.HostMemoryFile(s.Addr, s.Len)
	if err != nil {
		return rdma.MemoryKeys{}, fmt.Errorf("ipc: remote-writable memory must come from fabric.AllocHost: %w", err)
	}
	r := &region{file: f, length: s.Len, readable: a&rdma.AccessRemoteRead != 0, mappedBy: map[*inConn]struct{}{}}
	d.mu.Lock()
	for r.key == 0 || d.regions[r.key] != nil {
		r.key = randomKey()
	}
	d.regions[r.key] = r
	d.mu.Unlock()
	liveRegs.Add(1)
	return rdma.MemoryKeys{Handle: uintptr(r.key), Remote: r.key, Mode: rdma.AddrOffset}, nil
}

// randomKey makes keys unguessable: knowing a region's descriptor is what
// lets a peer map it.
func randomKey() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// Progress counts the bytes of this domain's large copies (see
// rdma.ProgressReporter): a copy of many MiB shows it moves.
func (d *Domain) Progress() uint64 { return d.job.moved.Load() }

var _ rdma.ProgressReporter = (*Domain)(nil)

// RegistrationMode: registration touches the region table under mu and
// talks to initiators over their control connections, never through the
// worker's data path, so the engine runs it beside the worker. That
// matters most for unregistering a shared region, which waits for every
// initiator that mapped it to acknowledge the revocation.
func (d *Domain) RegistrationMode() rdma.RegistrationMode { return rdma.RegisterBeside }

var _ rdma.Registrar = (*Domain)(nil)

// UnregisterMemory releases a registration. For a shared region it
// revokes every initiator's mapping and waits (up to ctlTimeout per
// unresponsive peer) until each acknowledged that no copy into it runs
// any more and it is unmapped: after it returns no write lands in the
// memory, as with an RDMA deregistration.
func (d *Domain) UnregisterMemory(k rdma.MemoryKeys) error {
	if k.Remote == 0 {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.localRegs == 0 {
			return fmt.Errorf("ipc: unregister: no local registration left: %w", rdma.ErrUnknownRegion)
		}
		d.localRegs--
		liveRegs.Add(-1)
		return nil
	}
	d.mu.Lock()
	r := d.regions[k.Remote]
	delete(d.regions, k.Remote)
	var conns []*inConn
	if r != nil {
		for c := range r.mappedBy {
			conns = append(conns, c)
		}
	}
	d.mu.Unlock()
	if r == nil {
		return fmt.Errorf("ipc: unregister key %#x: %w", k.Remote, rdma.ErrUnknownRegion)
	}
	_ = unix.Close(r.file.FD)
	liveRegs.Add(-1)
	if len(conns) == 0 {
		return nil
	}
	// Numbered and sent under one lock: each connection then sees the
	// revocations in the order of their numbers, so an acknowledgement
	// of a later one (acked) covers the earlier ones.
	d.revokeMu.Lock()
	d.revokeSeq++
	seq := d.revokeSeq
	for _, c := range conns {
		if !c.dead.Load() {
			if err := c.c.send(ctlMsg{kind: ctlRevoke, seq: seq, key: r.key}); err != nil {
				c.c.close() // its reader marks it dead
			}
		}
	}
	d.revokeMu.Unlock()
	var slow []int
	deadline := time.Now().Add(ctlTimeout())
	for _, c := range conns {
		pause := time.Microsecond
		for !c.dead.Load() && c.acked.Load() < seq {
			if time.Now().After(deadline) {
				slow = append(slow, c.pid)
				break
			}
			time.Sleep(pause)
			pause = min(2*pause, time.Millisecond)
		}
	}
	if len(slow) > 0 {
		return &rdma.ProviderError{Provider: TransportName, Op: "unregister", Errno: int(unix.ETIMEDOUT), Timeout: true,
			Msg: fmt.Sprintf("peer processes %v did not acknowledge the revocation within %v", slow, ctlTimeout())}
	}
	return nil
}

// ResolvePeer connects to the endpoint at addr. The connection finishes
// setting up in the background; writes posted meanwhile are held.
func (d *Domain) ResolvePeer(addr rdma.Address) (rdma.PeerID, error) {
	if id, ok := d.peerOf[addr.RawString()]; ok {
		return id, nil
	}
	if d.closed.Load() {
		return 0, errClosed
	}
	ea, err := parseAddr(addr)
	if err != nil {
		return 0, err
	}
	if h := hostID(); ea.host != 0 && h != 0 && ea.host != h {
		return 0, fmt.Errorf("ipc: %s lives on another host (ipc connects processes of one machine): %w", ea, rdma.ErrNotSupported)
	}
	uc, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: ea.socketName(), Net: "unixpacket"})
	if err != nil {
		// The socket's name holds the endpoint's random nonce, which no
		// later endpoint takes again: refused means that engine is gone.
		return 0, fmt.Errorf("ipc: connect: %w", rdma.StaleError(addr,
			fmt.Sprintf("%s: %v (the process exited or closed its engine, or runs in another network namespace)", ea, err)))
	}
	c, err := newCtlConn(uc)
	var pid int
	if err == nil {
		pid, err = c.checkPeer()
	}
	if err == nil {
		err = c.send(ctlMsg{kind: ctlHello, a: ctlVersion, b: uint64(d.ea.pid)})
	}
	if err != nil {
		_ = uc.Close()
		return 0, fmt.Errorf("ipc: connect to %s: %w", ea, err)
	}
	p := &outPeer{d: d, ea: ea, addr: addr, c: c, pid: pid, installed: map[uint64]*mapping{}, maps: map[uint64]*mapping{}}
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		c.close()
		return 0, errClosed
	}
	d.wg.Add(1)
	d.mu.Unlock()
	addPeerProcess(p)
	go d.runOutgoing(p)
	d.peers = append(d.peers, p)
	id := rdma.PeerID(len(d.peers) - 1)
	d.peerOf[addr.RawString()] = id
	return id, nil
}

func (d *Domain) DescribeError(ev rdma.Event) error { return describe(ev) }

// Close stops the control goroutines, unmaps every peer's memory and
// connection page and releases the regions. Peers see the connections
// close and fail what they still hold for this domain.
func (d *Domain) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	d.release()
	d.mu.Lock()
	d.closing = true
	in := make([]*inConn, 0, len(d.incoming))
	for c := range d.incoming {
		in = append(in, c)
	}
	d.mu.Unlock()
	_ = d.ln.Close()
	// Initiators hear that this is an orderly end before their connections
	// close (and before this domain's own outgoing connections do, which a
	// peer might otherwise take for this process exiting). Best effort: a
	// full socket means a stuck initiator, which then sees a plain end.
	for _, c := range in {
		_, _ = c.c.trySend(ctlMsg{kind: ctlBye})
	}
	for _, c := range in {
		c.c.close()
	}
	for _, p := range d.peers {
		p.c.close()
	}
	d.wg.Wait() // the readers of outgoing connections unmapped the peers' regions
	for _, p := range d.peers {
		p.dropPage()
	}
	d.mu.Lock()
	d.conns = append(d.conns, d.newConns...)
	d.newConns = nil
	regs := d.regions
	d.regions = map[uint64]*region{}
	d.mu.Unlock()
	for _, c := range d.conns {
		c.dropPage()
	}
	d.conns = nil
	for _, r := range regs { // the engine unregisters first; a direct user may not
		_ = unix.Close(r.file.FD)
		liveRegs.Add(-1)
	}
	d.mu.Lock()
	liveRegs.Add(-int64(d.localRegs))
	d.localRegs = 0
	d.mu.Unlock()
	_ = unix.Close(d.evfd) // peers signal their own copies; no goroutine of ours is left
	releaseHelpers()
	return nil
}
