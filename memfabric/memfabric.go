package memfabric

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

func init() {
	rdma.Register(provider{name: "mem", copy: true})
	rdma.Register(provider{name: "null", copy: false})
}

type provider struct {
	name string
	copy bool
}

func (p provider) Name() string         { return p.name }
func (p provider) Transports() []string { return []string{p.name} }

func (p provider) Domains(transport string, opts rdma.DomainOptions) ([]rdma.DomainInfo, error) {
	// No link speed: there is no link, and a made-up one would turn into
	// meaningless percentages.
	// Writes are carried out when posted, so in order.
	return []rdma.DomainInfo{{Provider: p.name, Transport: p.name, Name: p.name, NUMANode: -1, OrderedWrites: true, Reads: true}}, nil
}

func (p provider) Open(info rdma.DomainInfo, opts rdma.DomainOptions) (rdma.Domain, error) {
	d := &Domain{info: info, copy: p.copy, regions: make(map[uint64]region), limit: opts.QueueDepth}
	id := nextID.Add(1)
	raw := make([]byte, 9)
	raw[0] = 'm'
	binary.LittleEndian.PutUint64(raw[1:], uint64(id))
	d.addr, _ = rdma.NewAddress(raw, opts.Incarnation)
	domains.Store(d.addr, d)
	return d, nil
}

var (
	nextID  atomic.Int64
	nextKey atomic.Int64
	live    atomic.Int64
	domains sync.Map // rdma.Address -> *Domain
)

// lateData: SetLateData's choice of late targets (nil: none).
var lateData atomic.Pointer[func(addr, n uint64) bool]

// lateWrite is a write's payload not yet in the target's memory.
type lateWrite struct {
	dst  uint64
	data []byte
}

// SetLateData makes every "mem" domain of the process deliver a write
// whose target range late accepts (nil: none) with its immediate (and its
// completion) before its payload: the bytes land only at the next Flush. This is what a GPU may show a kernel that
// polls a flag raised after the NIC's completion: the NIC's writes into
// GPU memory are not ordered before the CPU's flag write unless the CPU
// first flushes them (cuFlushGPUDirectRDMAWrites). Tests use it to prove
// that a consumer flushes; it allocates per write and is no data path.
func SetLateData(late func(addr, n uint64) bool) {
	if late == nil {
		lateData.Store(nil)
		return
	}
	lateData.Store(&late)
}

// Flush lands the payloads every domain of the process holds back
// (SetLateData), as a GPUDirect RDMA flush does, and returns how many
// writes it landed.
func Flush() int {
	n := 0
	domains.Range(func(_, v any) bool {
		d := v.(*Domain)
		d.mu.Lock()
		late := d.late
		d.late = nil
		d.mu.Unlock()
		for _, w := range late {
			copy(bytesAt(w.dst, uint64(len(w.data))), w.data)
		}
		n += len(late)
		return true
	})
	return n
}

// Lookup returns the open domain with address a, for fault injection.
func Lookup(a rdma.Address) (*Domain, bool) {
	d, ok := domains.Load(a)
	if !ok {
		return nil, false
	}
	return d.(*Domain), true
}

type region struct {
	addr   uintptr
	len    uint64
	access rdma.Access
}

type message struct {
	data []byte
}

// Domain is one in-process endpoint. The worker calls its data-path
// methods from one goroutine; peers reach it through inbox, under mu.
type Domain struct {
	info  rdma.DomainInfo
	addr  rdma.Address
	copy  bool
	limit int

	mu        sync.Mutex // guards regions, inbox, msgs
	regions   map[uint64]region
	inbox     []rdma.Event // immediates from peers, polled from inboxHead
	inboxHead int
	msgs      []message // messages not yet matched to a receive

	peers    []*Domain
	peerOf   map[rdma.Address]rdma.PeerID
	done     []rdma.Event // local completions, polled from doneHead
	doneHead int
	recvs    []rdma.RecvOp
	closed   bool
	held     []rdma.Event // completions kept by HoldWrites, under mu
	release  bool         // Release asked for held, under mu
	late     []lateWrite  // payloads LateData holds back, under mu

	faults Faults
	moved  atomic.Uint64 // bytes this domain's writes copied (Progress)
}

// Faults injects failures into a domain. Set them through Inject.
type Faults struct {
	// FailWrites makes the next n write completions fail with Errno.
	FailWrites int
	// RefusePosts makes the next n posted writes be refused for good.
	RefusePosts int
	// Busy makes PostWrites accept at most this many ops per call (0: no limit).
	Busy int
	// PollError makes the next Poll fail the domain as a whole.
	PollError error
	Errno     int32
	// Dead makes the domain a peer that died: writes to it are accepted
	// and never complete, and peers' CheckPeer reports it gone.
	Dead bool
	// ResetWrites makes the next n write completions fail with ECONNRESET,
	// an error that blames the peer.
	ResetWrites int
	// StrayErrors makes the next n polls report an error completion that
	// names no operation (context 0), as libfabric 1.17's shm does.
	StrayErrors int
	// BlockPosts, when set, makes PostWrites block until it is closed: a
	// worker stuck inside a provider call.
	BlockPosts chan struct{}
	// HoldWrites keeps the completions of writes posted from now on until
	// Release: the ops are accepted (and delivered) but stay in flight, as
	// with a peer that stopped answering.
	HoldWrites bool
	// Heartbeats makes the domain offer heartbeats (rdma.PeerProber): a
	// zero-length write without immediate and without key, which a live
	// peer accepts and ignores, as RDMA responders do (IBA C9-88).
	Heartbeats bool
	// HoldHeartbeats keeps the completions of heartbeats posted from now
	// on until Release, as behind a long queue of earlier writes.
	HoldHeartbeats bool
	// SlowCopy makes writes posted here copy 16 KiB at a time, sleeping
	// this long before each: a provider call that lasts but keeps moving
	// bytes.
	SlowCopy time.Duration
	// BeforePoll, when set, runs at the start of every Poll on the
	// polling goroutine (the worker), with no lock held: tests use it to
	// act at an exact point of a worker's pass.
	BeforePoll func()
	// BlockRegister, when set, makes RegisterMemory and UnregisterMemory
	// wait until it is closed, with no lock held: a registration that
	// pins for a long time, as a large one does on a real NIC.
	BlockRegister chan struct{}
}

// Inject sets the faults of the domain with address a. It is meant for
// tests and must be called while the worker is quiescent or accept races.
func Inject(a rdma.Address, f Faults) error {
	d, ok := Lookup(a)
	if !ok {
		return fmt.Errorf("inject: no mem domain %s: %w", a, rdma.ErrInvalidArgument)
	}
	d.mu.Lock()
	d.faults = f
	d.mu.Unlock()
	return nil
}

var _ rdma.Domain = (*Domain)(nil)

func (d *Domain) Info() rdma.DomainInfo { return d.info }
func (d *Domain) Address() rdma.Address { return d.addr }

// RegisterMemory accepts host spans and, so multi-group engines can be
// tested without a GPU, spans labelled with a CUDA device as long as their
// address is host memory the test mapped.
func (d *Domain) RegisterMemory(s rdma.MemorySpan, a rdma.Access) (rdma.MemoryKeys, error) {
	d.waitRegister()
	live.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	k := uint64(nextKey.Add(1)) // unique across domains, so a key used on the wrong NIC fails
	d.regions[k] = region{addr: s.Addr, len: s.Len, access: a}
	return rdma.MemoryKeys{Handle: uintptr(k), Local: k, Remote: k, Mode: rdma.AddrVirtual}, nil
}

// waitRegister waits out Faults.BlockRegister.
func (d *Domain) waitRegister() {
	d.mu.Lock()
	block := d.faults.BlockRegister
	d.mu.Unlock()
	if block != nil {
		<-block
	}
}

// RegistrationMode: registration touches only the region table, under
// d.mu, so the engine may register beside the worker.
func (d *Domain) RegistrationMode() rdma.RegistrationMode { return rdma.RegisterBeside }

var _ rdma.Registrar = (*Domain)(nil)

func (d *Domain) UnregisterMemory(k rdma.MemoryKeys) error {
	d.waitRegister()
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.regions[uint64(k.Handle)]; !ok {
		return fmt.Errorf("unregister key %d: %w", k.Handle, rdma.ErrUnknownRegion)
	}
	delete(d.regions, uint64(k.Handle))
	live.Add(-1)
	return nil
}

// LiveRegistrations counts registrations not yet unregistered, across all
// mem and null domains: a domain closed with registrations left keeps them
// counted, so tests can see leaks.
func LiveRegistrations() int64 { return live.Load() }

func (d *Domain) ResolvePeer(a rdma.Address) (rdma.PeerID, error) {
	if p, ok := d.peerOf[a]; ok {
		return p, nil
	}
	t, ok := Lookup(a)
	if !ok {
		// Endpoint numbers are never reused: one this process handed out
		// belonged to an engine that closed.
		if r := a.RawString(); len(r) == 9 && r[0] == 'm' {
			if id := int64(binary.LittleEndian.Uint64([]byte(r[1:]))); id > 0 && id <= nextID.Load() {
				return 0, fmt.Errorf("%s: resolve peer: %w", d.info.Transport, rdma.StaleError(a, "its engine closed"))
			}
		}
		return 0, fmt.Errorf("%s: no endpoint at %s: %w", d.info.Transport, a, rdma.ErrInvalidArgument)
	}
	if d.peerOf == nil {
		d.peerOf = make(map[rdma.Address]rdma.PeerID)
	}
	d.peers = append(d.peers, t)
	p := rdma.PeerID(len(d.peers) - 1)
	d.peerOf[a] = p
	return p, nil
}

// errno values this provider reports.
const (
	errAccess = 13  // EACCES: a range outside the region at the target
	errNoKey  = 126 // ENOKEY: no region with the key at the target
	errReset  = 104
	errClosed = 108
	errDead   = -1 // deliver: the target is Dead, the op never completes
	errPerm   = 1  // EPERM: a read of a region without AccessRemoteRead
)

func (d *Domain) PostWrites(ops []rdma.WriteOp) (int, error) {
	n := len(ops)
	d.mu.Lock()
	f := &d.faults
	if f.Busy > 0 {
		n = min(n, f.Busy)
	}
	refuse := f.RefusePosts > 0
	if refuse {
		f.RefusePosts--
	}
	hold, holdBeats := f.HoldWrites, f.HoldHeartbeats
	block := f.BlockPosts
	slow := f.SlowCopy
	d.mu.Unlock()
	if block != nil {
		<-block
	}
	if refuse {
		return 0, &rdma.ProviderError{Provider: d.info.Transport, Op: "post write", Errno: 22, Msg: "injected refusal"}
	}
	for i := range ops[:n] {
		op := &ops[i]
		ev := rdma.Event{Kind: rdma.EventWrite, Context: op.Context}
		if int(op.Peer) >= len(d.peers) {
			ev.Errno = 22
		} else if errno := d.peers[op.Peer].deliver(op, d.copy, slow, &d.moved); errno == errDead {
			continue // a dead peer never answers
		} else if errno != 0 {
			ev.Errno = errno
		}
		if hold || (holdBeats && isHeartbeat(op)) {
			d.mu.Lock()
			d.held = append(d.held, ev)
			d.mu.Unlock()
			continue
		}
		d.done = append(d.done, ev)
	}
	return n, nil
}

// Release ends HoldWrites on the domain with address a: the completions
// held so far come back at its next poll.
func Release(a rdma.Address) error {
	d, ok := Lookup(a)
	if !ok {
		return fmt.Errorf("release: no mem domain %s: %w", a, rdma.ErrInvalidArgument)
	}
	d.mu.Lock()
	d.faults.HoldWrites, d.faults.HoldHeartbeats = false, false
	d.release = true
	d.mu.Unlock()
	return nil
}

func (t *Domain) isDead() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.faults.Dead
}

// CheckPeer reports a peer that was closed or marked Dead as gone.
func (d *Domain) CheckPeer(p rdma.PeerID) error {
	if int(p) >= len(d.peers) {
		return nil
	}
	t := d.peers[p]
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("%s peer: %w", d.info.Transport, rdma.StaleError(t.addr, "its engine closed"))
	}
	if t.faults.Dead {
		return fmt.Errorf("%s peer %s is gone: %w", d.info.Transport, t.addr, rdma.ErrPeerLost)
	}
	return nil
}

var (
	_ rdma.PeerChecker = (*Domain)(nil)
	_ rdma.PeerProber  = (*Domain)(nil)
)

// isHeartbeat: a zero-length write without immediate or key.
func isHeartbeat(op *rdma.WriteOp) bool {
	return op.Length == 0 && op.Flags&rdma.WriteHasImm == 0 && op.RemoteKey == 0
}

// ProbeOp gives a heartbeat when Faults.Heartbeats is set.
func (d *Domain) ProbeOp(p rdma.PeerID) (rdma.WriteOp, bool) {
	d.mu.Lock()
	on := d.faults.Heartbeats
	d.mu.Unlock()
	if !on || int(p) >= len(d.peers) {
		return rdma.WriteOp{}, false
	}
	return rdma.WriteOp{Peer: p}, true
}

// copySlice is how much a write copies between two updates of its
// domain's progress counter.
const copySlice = 1 << 20

// Progress counts the bytes this domain's writes copied (see
// rdma.ProgressReporter).
func (d *Domain) Progress() uint64 { return d.moved.Load() }

var _ rdma.ProgressReporter = (*Domain)(nil)

// deliver performs op at its target, counting the bytes it copies in
// moved, slice by slice (each after a pause of slow).
func (t *Domain) deliver(op *rdma.WriteOp, copyBytes bool, slow time.Duration, moved *atomic.Uint64) int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.faults.Dead {
		return errDead
	}
	if t.closed {
		return errClosed
	}
	if isHeartbeat(op) {
		return 0 // nothing to check or to write
	}
	r, ok := t.regions[op.RemoteKey]
	if !ok {
		return errNoKey
	}
	if op.Length > 0 {
		if op.Remote < uint64(r.addr) || op.Remote+op.Length > uint64(r.addr)+r.len {
			return errAccess
		}
		if op.Flags&rdma.WriteRead != 0 {
			return t.read(op, r, copyBytes, moved)
		}
		if copyBytes {
			src := bytesAt(op.Local, op.Length)
			if late := lateData.Load(); late != nil && (*late)(op.Remote, op.Length) {
				t.late = append(t.late, lateWrite{dst: op.Remote, data: append([]byte(nil), src...)})
				moved.Add(op.Length)
			} else {
				slice := uint64(copySlice)
				if slow > 0 {
					slice = 16 << 10
				}
				for off := uint64(0); off < op.Length; off += slice {
					n := min(slice, op.Length-off)
					if slow > 0 {
						time.Sleep(slow)
					}
					copy(bytesAt(op.Remote+off, n), bytesAt(op.Local+off, n))
					moved.Add(n)
				}
			}
		}
	}
	if op.Flags&rdma.WriteHasImm != 0 {
		t.inbox = append(t.inbox, rdma.Event{Kind: rdma.EventImm, Imm: op.Imm})
	}
	return 0
}

func (d *Domain) PostSends(ops []rdma.SendOp) (int, error) {
	for i := range ops {
		op := &ops[i]
		ev := rdma.Event{Kind: rdma.EventSend, Context: op.Context}
		if int(op.Peer) >= len(d.peers) {
			ev.Errno = 22
		} else if d.peers[op.Peer].isDead() {
			continue
		} else {
			data := make([]byte, op.Length)
			copy(data, bytesAt(op.Local, op.Length))
			t := d.peers[op.Peer]
			t.mu.Lock()
			if t.closed {
				ev.Errno = errClosed
			} else {
				t.msgs = append(t.msgs, message{data: data})
			}
			t.mu.Unlock()
		}
		d.done = append(d.done, ev)
	}
	return len(ops), nil
}

func (d *Domain) PostRecvs(ops []rdma.RecvOp) (int, error) {
	d.recvs = append(d.recvs, ops...)
	return len(ops), nil
}

func (d *Domain) Poll(events []rdma.Event) (int, error) {
	d.mu.Lock()
	if hook := d.faults.BeforePoll; hook != nil {
		d.mu.Unlock()
		hook()
		d.mu.Lock()
	}
	if d.release {
		d.done = append(d.done, d.held...)
		d.held, d.release = nil, false
	}
	stray := d.faults.StrayErrors > 0
	if stray {
		d.faults.StrayErrors--
	}
	if err := d.faults.PollError; err != nil {
		d.faults.PollError = nil
		d.mu.Unlock()
		return 0, err
	}
	n := 0
	if stray && len(events) > 0 {
		events[0] = rdma.Event{Errno: 5}
		n++
	}
	for n < len(events) && d.doneHead < len(d.done) {
		ev := d.done[d.doneHead]
		d.doneHead++
		if ev.Kind == rdma.EventWrite && ev.Errno == 0 && d.faults.ResetWrites > 0 {
			d.faults.ResetWrites--
			ev.Errno = errReset
		}
		if ev.Kind == rdma.EventWrite && d.faults.FailWrites > 0 {
			d.faults.FailWrites--
			ev.Errno = d.faults.Errno
			if ev.Errno == 0 {
				ev.Errno = 5
			}
		}
		events[n] = ev
		n++
	}
	for n < len(events) && d.inboxHead < len(d.inbox) {
		events[n] = d.inbox[d.inboxHead]
		d.inboxHead++
		n++
	}
	if d.inboxHead == len(d.inbox) {
		d.inbox, d.inboxHead = d.inbox[:0], 0
	}
	for n < len(events) && len(d.msgs) > 0 && len(d.recvs) > 0 {
		m, r := d.msgs[0], d.recvs[0]
		d.msgs, d.recvs = d.msgs[1:], d.recvs[1:]
		ev := rdma.Event{Kind: rdma.EventRecv, Context: r.Context, Length: uint64(len(m.data))}
		if uint64(len(m.data)) > r.Length {
			ev.Errno = 90 // EMSGSIZE
		} else {
			copy(bytesAt(r.Local, r.Length), m.data)
		}
		events[n] = ev
		n++
	}
	d.mu.Unlock()
	if d.doneHead == len(d.done) {
		d.done, d.doneHead = d.done[:0], 0
	}
	return n, nil
}

func (d *Domain) DescribeError(ev rdma.Event) error {
	msg := "error"
	switch ev.Errno {
	case errAccess:
		msg = "remote access error"
	case errNoKey:
		msg = "remote region unknown (unregistered)"
	case errPerm:
		msg = "remote region not readable"
	case errClosed:
		msg = "peer closed"
	case 90:
		msg = "message too long"
	case 22:
		msg = "invalid peer"
	case errReset:
		msg = "connection reset by peer"
	default:
		msg = "injected error"
	}
	return &rdma.ProviderError{Provider: d.info.Transport, Op: ev.Kind.String() + " completion", Errno: int(ev.Errno), Msg: msg,
		PeerLost: ev.Errno == errReset, RegionGone: ev.Errno == errNoKey, NotReadable: ev.Errno == errPerm}
}

func (d *Domain) Close() error {
	d.mu.Lock()
	d.closed = true
	d.regions = nil
	d.late = nil
	d.mu.Unlock()
	domains.Delete(d.addr)
	return nil
}

// bytesAt views n bytes of non-Go memory at addr.
func bytesAt(addr, n uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(nil), uintptr(addr))), int(n))
}

var _ rdma.Abandoner = (*Domain)(nil)

// Abandon is Close, as on libfabric's shm: the engine calls it instead of
// Close when ops were still in flight at its close deadline, and nil
// means the domain could be closed after all.
func (d *Domain) Abandon() error { return d.Close() }

// read performs a WriteRead op at its target t (t.mu held): it copies
// from t's region r into the initiator's memory, a slice at a time so the
// progress counter moves during a long read.
func (t *Domain) read(op *rdma.WriteOp, r region, copyBytes bool, moved *atomic.Uint64) int32 {
	if r.access&rdma.AccessRemoteRead == 0 {
		return errPerm
	}
	if !copyBytes {
		return 0
	}
	for off := uint64(0); off < op.Length; off += copySlice {
		n := min(uint64(copySlice), op.Length-off)
		copy(bytesAt(op.Local+off, n), bytesAt(op.Remote+off, n))
		moved.Add(n)
	}
	return 0
}
