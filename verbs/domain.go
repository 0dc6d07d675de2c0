package verbs

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ibv"
)

// Defaults, each overridable through rdma.DomainOptions where it says so.
const (
	defaultDepth     = 1024             // DomainOptions.QueueDepth
	defaultHandshake = 10 * time.Second // DomainOptions.HandshakeTimeout
	udQueueDepth     = 64               // handshake datagrams in flight each way
	qkey             = 0x46525259       // "FRRY": UD datagrams with another qkey are dropped by the HCA
)

// Domain is one verbs NIC endpoint: a port of a device, with one completion
// queue for everything, a message SRQ for two-sided receives, an RMA SRQ
// of zero-length receives consumed by incoming writes with immediate, and
// a UD queue pair whose address is the domain's public Address. Peers are
// reached over two RC queue pairs each (messages, RMA), connected lazily by
// a handshake over UD (see handshake.go).
//
// A Domain implements rdma.Domain: it is owned by one worker and is
// not safe for concurrent use; nothing but Close blocks.
type Domain struct {
	info    rdma.DomainInfo
	dom     *ibv.Dom
	self    udAddr
	addr    rdma.Address
	path    pathInfo
	gid     ibv.GIDEntry
	sqDepth uint32
	depth   int
	hs      *handshaker

	peers   []*peer
	byAddr  map[string]rdma.PeerID
	backlog []rdma.PeerID // connected peers that still hold ops
	mrMu    sync.Mutex    // guards mrs: registration runs beside the worker
	mrs     map[uintptr]ibv.MR
	retired []ibv.QP
	pending []rdma.Event // completions made in Go (handshake failures)
	closed  bool

	qpOwner map[uint32]rdma.PeerID // current RC queue pairs by number
	// dropSend, when set (by tests), loses handshake datagrams on purpose.
	dropSend          func(*hsMsg) bool
	errQPs            [16]uint32
	judgeW            func(*rdma.WriteOp) verdict
	segs              [64]ibv.Seg
	ud                [16]ibv.UDMsg
	msgBuf            []byte
	udSendErrors      uint64
	dmabufFallbacks   atomic.Uint64 // counted beside the worker
	sqFull, slotsFull uint64
}

// peer is one remote domain.
type peer struct {
	addr     udAddr
	self     bool
	local    qpInfo
	msg, rma ibv.QP
	ah       ibv.AH
	ready    bool // connected and visible to the C post helpers
	queued   bool // in Domain.backlog
	heldW    []rdma.WriteOp
	heldS    []rdma.SendOp
}

var _ rdma.Domain = (*Domain)(nil)

// Open opens the domain info describes (as listed by the provider's
// Domains): device info.Name, port info.Port (0 picks the first active
// port; info.Index is the engine's, not a port). opts.Node, when it is an IP address, picks the GID of that address.
func Open(info rdma.DomainInfo, opts rdma.DomainOptions) (*Domain, error) {
	depth := opts.QueueDepth
	if depth <= 0 {
		depth = defaultDepth
	}
	if depth > 1<<20 {
		return nil, fmt.Errorf("verbs: queue depth %d: %w", depth, rdma.ErrInvalidArgument)
	}
	hsTimeout := opts.HandshakeTimeout
	if hsTimeout <= 0 {
		hsTimeout = defaultHandshake
	}
	if _, err := deviceNames(); err != nil {
		return nil, err
	}
	q, err := ibv.OpenDevice(info.Name)
	if err != nil {
		return nil, wrapErr("open "+info.Name, err)
	}
	attr, port, pa, gid, err := choosePort(q, info.Port, opts.Node)
	q.Close()
	if err != nil {
		return nil, fmt.Errorf("verbs: open %s: %w", info.Name, err)
	}
	// Size the CQ for everything that can be outstanding at once, so it
	// cannot overflow: send-side slots, user receives, the RMA SRQ and the
	// UD queues. The device's limits shrink the depth, never the CQ alone.
	if attr.MaxCQE > 0 && 3*depth+2*udQueueDepth > attr.MaxCQE {
		depth = (attr.MaxCQE - 2*udQueueDepth) / 3
	}
	if attr.MaxSRQWR > 0 && depth > attr.MaxSRQWR {
		depth = attr.MaxSRQWR
	}
	sq := depth
	if attr.MaxQPWR > 0 && sq > attr.MaxQPWR {
		sq = attr.MaxQPWR
	}
	if sqDepthOverride > 0 {
		sq = sqDepthOverride
	}
	cfg := ibv.Config{
		CQE: uint32(3*depth + 2*udQueueDepth), Slots: uint32(depth), RecvSlots: uint32(depth),
		MsgSRQWR: uint32(depth), RMASRQWR: uint32(depth), UDRecv: udQueueDepth, UDSend: udQueueDepth,
		QKey: qkey, Port: uint8(port), WantThreadDomain: true,
	}
	dom, err := ibv.OpenDom(info.Name, cfg)
	if err != nil {
		return nil, wrapErr("open "+info.Name, err)
	}
	d := &Domain{dom: dom, gid: gid, sqDepth: uint32(sq), depth: depth,
		byAddr: make(map[string]rdma.PeerID), mrs: make(map[uintptr]ibv.MR), qpOwner: make(map[uint32]rdma.PeerID),
		msgBuf: make([]byte, 0, hsMsgLen)}
	d.self = udAddr{Link: pa.LinkLayer, GID: gid.GID, QPN: dom.UDQPN(), LID: pa.LID}
	// The incarnation is carried, not checked: the UD queue pair number in
	// the address is new with every domain, so an earlier engine's
	// address reaches no queue pair (its handshake fails at the timeout).
	d.addr, _ = rdma.NewAddress(d.self.address().Raw(), opts.Incarnation)
	d.path = pathInfo{port: uint8(port), mtu: pa.ActiveMTU, global: pa.LinkLayer == ibv.LinkEthernet,
		sgidIndex: uint8(gid.Index), rdAtomic: rdAtomicOf(attr)}
	d.hs = newHandshaker(d, hsTimeout)
	d.judgeW = d.judgeWrite
	// An RC queue pair carries out a peer's writes in order; longer
	// writes than the port takes are posted in pieces by the engine.
	d.info = rdma.DomainInfo{Provider: provName, Transport: provName, Name: info.Name,
		PCIAddress: info.PCIAddress, NUMANode: info.NUMANode, LinkSpeed: info.LinkSpeed, Index: info.Index, Port: port,
		MaxWrite: pa.MaxMsgSize, OrderedWrites: true, Reads: true}
	if d.info.PCIAddress == "" && d.info.LinkSpeed == 0 {
		if ds, err := Devices(); err == nil {
			for _, di := range ds {
				if di.Name == info.Name {
					d.info.PCIAddress, d.info.NUMANode = di.PCIAddress, di.NUMANode
					for _, p := range di.Ports {
						if p.Number == port {
							d.info.LinkSpeed = p.LinkSpeed
						}
					}
				}
			}
		}
	}
	return d, nil
}

// sqDepthOverride shrinks every RC send queue below the slot count, so
// tests can drive ibv_post_send into ENOMEM and the bad_wr walk.
var sqDepthOverride int

// choosePort picks the port (index, else the first active one) and its GID.
func choosePort(q *ibv.Context, index int, node string) (ibv.DeviceAttr, int, ibv.PortAttr, ibv.GIDEntry, error) {
	attr, err := q.QueryDevice()
	if err != nil {
		return attr, 0, ibv.PortAttr{}, ibv.GIDEntry{}, wrapErr("query device", err)
	}
	for port := 1; port <= attr.PhysPorts; port++ {
		if index > 0 && port != index {
			continue
		}
		pa, err := q.QueryPort(port)
		if err != nil {
			return attr, 0, pa, ibv.GIDEntry{}, wrapErr("query port", err)
		}
		if pa.State != ibv.PortActive {
			continue
		}
		gid, err := chooseGID(pa.LinkLayer, q.GIDs(port, pa.GIDTableLen), node)
		if err != nil {
			return attr, 0, pa, gid, err
		}
		return attr, port, pa, gid, nil
	}
	return attr, 0, ibv.PortAttr{}, ibv.GIDEntry{}, fmt.Errorf("no active port (asked for %d): %w", index, rdma.ErrNotSupported)
}

// Info describes the domain; Port is the port number.
func (d *Domain) Info() rdma.DomainInfo { return d.info }

// Address is the domain's public address (its UD queue pair).
func (d *Domain) Address() rdma.Address { return d.addr }

// GIDIndex is the source GID index in use.
func (d *Domain) GIDIndex() int { return d.gid.Index }

// ThreadDomain reports whether the domain runs on a thread domain and
// parent domain (no locks in the provider's data path). Devices without
// thread domains (rxe) run on a plain protection domain.
func (d *Domain) ThreadDomain() bool { return d.dom != nil && d.dom.ThreadDomain() }

// Stats are counters for diagnostics.
type Stats struct {
	Peers           int
	Retransmits     uint64 // handshake datagrams sent again
	Reconnects      uint64 // peers connected again after an error completion
	SendQueueFull   uint64 // posts stopped by ENOMEM (walked through bad_wr)
	SlotsFull       uint64 // posts stopped because QueueDepth ops were in flight
	StaleHandshakes uint64 // handshake datagrams for a past generation
	UDSendErrors    uint64
	DmabufFallbacks uint64 // dma-buf registrations done with ibv_reg_mr instead
}

// Stats returns the domain's counters.
func (d *Domain) Stats() Stats {
	return Stats{Peers: len(d.peers), Retransmits: d.hs.retransmits, Reconnects: d.hs.restarts, StaleHandshakes: d.hs.staleDiscarded,
		UDSendErrors: d.udSendErrors, DmabufFallbacks: d.dmabufFallbacks.Load(),
		SendQueueFull: d.sqFull, SlotsFull: d.slotsFull}
}

// RegisterMemory registers span. Relaxed ordering is always asked for
// (devices without it ignore the flag); GPU spans with a dma-buf fd use
// ibv_reg_dmabuf_mr (from DmabufOffset, iova = Addr, so peers address it
// like host memory), else ibv_reg_mr (peer memory).
func (d *Domain) RegisterMemory(span rdma.MemorySpan, access rdma.Access) (rdma.MemoryKeys, error) {
	if d.closed {
		return rdma.MemoryKeys{}, rdma.ErrClosed
	}
	if span.Addr == 0 || span.Len == 0 {
		return rdma.MemoryKeys{}, fmt.Errorf("verbs: register %d bytes at %#x: %w", span.Len, span.Addr, rdma.ErrInvalidArgument)
	}
	flags := ibv.AccessLocalWrite | ibv.AccessRelaxedOrdering
	// Remote read only when asked: a writable region is not readable.
	if access&rdma.AccessRemoteWrite != 0 {
		flags |= ibv.AccessRemoteWrite
	}
	if access&rdma.AccessRemoteRead != 0 {
		flags |= ibv.AccessRemoteRead
	}
	fd := -1
	if span.Device.IsCUDA() && span.DmabufFD >= 0 {
		fd = span.DmabufFD
	}
	mr, err := d.dom.RegMR(span.Addr, span.Len, flags, fd, span.DmabufOffset)
	if err != nil && fd >= 0 && errors.Is(wrapErr("", err), rdma.ErrNotSupported) {
		// No dma-buf support in this kernel or device: peer memory
		// (nvidia-peermem) may still register it. Counted in Stats.
		d.dmabufFallbacks.Add(1)
		mr, err = d.dom.RegMR(span.Addr, span.Len, flags, -1, 0)
	}
	if err != nil {
		return rdma.MemoryKeys{}, wrapErr("register memory", err)
	}
	d.mrMu.Lock()
	d.mrs[mr.Handle()] = mr
	d.mrMu.Unlock()
	lkey, rkey := mr.Keys()
	return rdma.MemoryKeys{Handle: mr.Handle(), Local: uint64(lkey), Remote: uint64(rkey), Mode: rdma.AddrVirtual}, nil
}

// UnregisterMemory releases a registration made by RegisterMemory.
func (d *Domain) UnregisterMemory(keys rdma.MemoryKeys) error {
	if d.closed {
		return rdma.ErrClosed
	}
	d.mrMu.Lock()
	mr, ok := d.mrs[keys.Handle]
	delete(d.mrs, keys.Handle)
	d.mrMu.Unlock()
	if !ok {
		return fmt.Errorf("verbs: unregister %#x: %w", keys.Handle, rdma.ErrUnknownRegion)
	}
	return wrapErr("unregister memory", mr.Dereg())
}

// RegistrationMode: ibv_reg_mr and ibv_dereg_mr are thread-safe and
// share nothing with posting and polling but the protection domain, and
// the Go side guards its table of registrations (mrMu), so the engine
// registers beside the worker: pinning a large region (the kernel walks
// and pins every page) no longer stops the worker's transfers.
func (d *Domain) RegistrationMode() rdma.RegistrationMode { return rdma.RegisterBeside }

var _ rdma.Registrar = (*Domain)(nil)

// Close releases everything: queue pairs (connected and retired), address
// handles, registrations, then the domain. Pending ops are dropped.
// Calling it again does nothing.
func (d *Domain) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	var first error
	keep := func(err error) {
		if first == nil && err != nil {
			first = err
		}
	}
	for _, p := range d.peers {
		keep(p.msg.Destroy())
		keep(p.rma.Destroy())
		p.ah.Destroy()
	}
	for _, q := range d.retired {
		keep(q.Destroy())
	}
	for h, mr := range d.mrs {
		keep(mr.Dereg())
		delete(d.mrs, h)
	}
	d.dom.Close()
	d.peers, d.retired, d.pending = nil, nil, nil
	return wrapErr("close", first)
}

// validLength reports whether a length fits one scatter-gather entry.
func validLength(n uint64) bool { return n <= math.MaxUint32 }
