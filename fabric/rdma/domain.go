package rdma

import "time"

// This file is the provider contract: what a NIC domain must do for the
// engine. Providers (efa, verbs, ipc, memfabric) implement Domain and
// register a Provider with Register.

// DomainInfo describes one NIC endpoint a provider can open.
type DomainInfo struct {
	Provider   string // registry name of the provider, e.g. "libfabric", "verbs"
	Transport  string // the transport it runs: "efa", "tcp;ofi_rxm", "shm", "verbs", "null"
	Name       string // NIC or domain name: "rdmap16s27", "mlx5_0", "lo"
	PCIAddress string // "0000:16:00.0", empty if none
	NUMANode   int    // -1 when unknown
	LinkSpeed  uint64 // bits per second, 0 when unknown
	// Index distinguishes domains that share a name (several endpoints on
	// one loopback interface emulating several NICs).
	Index int
	// MaxWrite is the longest write the provider takes in one op, as it
	// reports it (libfabric's max_msg_size, a verbs port's max_msg_sz);
	// 0 means no limit. The engine posts longer writes in pieces.
	MaxWrite uint64
	// OrderedWrites says that writes to one peer are carried out in the
	// order they were posted, so an immediate never lands before the
	// bytes of an earlier write to that peer (libfabric FI_ORDER_WAW, a
	// verbs RC queue pair, the in-process providers). Without it the
	// engine posts the last piece of a split write, which carries the
	// immediate, only once the earlier pieces completed.
	OrderedWrites bool
	// Reads says the domain carries out WriteOps flagged WriteRead (RDMA
	// READ). The engine refuses reads on a domain without it, so a
	// provider that does not know the flag is never handed one.
	Reads bool
}

// DomainOptions are what Open needs besides the DomainInfo.
type DomainOptions struct {
	// Node pins a provider to an address or interface ("127.0.0.1").
	Node string
	// Instance is unique among the domains this process opens; providers
	// use it to give endpoints distinct names (shm needs that).
	Instance int
	// QueueDepth bounds the operations in flight per domain; 0 picks the
	// provider's default. The engine never posts more than this.
	QueueDepth int
	// HandshakeTimeout bounds connection setup for connection-oriented
	// providers (verbs); 0 means 10 s.
	HandshakeTimeout time.Duration
	// Incarnation is the opening engine's random identity. Providers put
	// it in their Address and refuse, at ResolvePeer or in their first
	// exchange with the peer, an address whose incarnation is not the
	// live one at its endpoint (StaleError).
	Incarnation uint64
	// Port pins the listening port of providers that listen on one (tcp),
	// so a restarted process takes the same address; 0 lets the system
	// choose.
	Port int
}

// Access says who may touch a registered region.
type Access uint8

const (
	// AccessLocal allows local reads and writes only (sources of writes,
	// send and receive buffers).
	AccessLocal Access = 0
	// AccessRemoteWrite also lets peers write into the region.
	AccessRemoteWrite Access = 1 << iota
	// AccessRemoteRead lets peers read the region (WriteRead ops). A
	// region is readable only when registered with it: remote write does
	// not imply remote read.
	AccessRemoteRead
)

// MemorySpan is a range of memory to register with a domain. It is never Go
// heap memory: mmap'd host memory, C memory, or GPU memory.
type MemorySpan struct {
	Addr   uintptr
	Len    uint64
	Device Device
	// DmabufFD is a dma-buf file descriptor for GPU memory, or -1.
	DmabufFD int
	// DmabufOffset is where Addr lies within the dma-buf (dma-bufs cover
	// whole pages; a tensor need not start on one).
	DmabufOffset uint64
}

// MemoryKeys is a domain's registration of one MemorySpan.
type MemoryKeys struct {
	Handle uintptr  // provider's handle, passed back to UnregisterMemory
	Local  uint64   // local descriptor for WriteOp.LocalDesc (fi_mr_desc, lkey)
	Remote uint64   // remote key peers put in their writes
	Mode   AddrMode // how peers form remote addresses into the span
}

// PeerID is a provider's resolved handle for a peer address (fi_addr_t, a
// verbs peer index). The engine caches it per domain.
type PeerID uint64

// Write op flags.
const (
	// WriteHasImm delivers WriteOp.Imm to the target's completion queue.
	WriteHasImm uint32 = 1 << 0
	// WriteDelivered asks for the completion only once the target has
	// processed the write, not when it left (heartbeats: a write that
	// only reached a socket buffer says nothing about the peer).
	// Providers that cannot do that ignore it.
	WriteDelivered uint32 = 1 << 1
	// WriteRead turns the op into an RDMA READ: Length bytes move from
	// Remote (a region the target registered with AccessRemoteRead) into
	// Local, whose region must allow local writes. It never carries an
	// immediate (WriteHasImm is ignored) and completes as an EventWrite at
	// the initiator only. Reads share the write batch so that one provider
	// call posts writes and reads alike, with no op type of its own to
	// convert. Only domains whose DomainInfo.Reads is set get it.
	WriteRead uint32 = 1 << 2
	// WriteVisible marks a write of a request whose notification follows
	// it: its completion must mean that its bytes are visible at the
	// target, because the engine sends the notification once the
	// request's writes completed, possibly through another NIC. Providers
	// whose write completion already means that (verbs RC, shm, ipc, mem)
	// ignore it; libfabric providers that complete a write once it was
	// sent (tcp;ofi_rxm; efa's writes emulated over sends) ask delivery
	// completion for it, as for WriteDelivered. Providers that do not know
	// the flag must treat a write completion as delivery or the engine's
	// notifications may overtake their writes.
	WriteVisible uint32 = 1 << 3
)

// WriteOp is one RDMA write, fully resolved. Its layout is shared with C
// (providers pass a []WriteOp to their C shim in one call): eight 8-byte
// fields, no pointers.
type WriteOp struct {
	Local     uint64 // local virtual address of the source
	Length    uint64 // bytes; 0 is an immediate-only write
	LocalDesc uint64 // MemoryKeys.Local of the source region
	Remote    uint64 // remote address (virtual or offset, per the descriptor)
	RemoteKey uint64
	Peer      PeerID
	Context   uint64 // returned in the completion Event
	Imm       uint32
	Flags     uint32
}

// SendOp is one two-sided send of a registered buffer.
type SendOp struct {
	Local     uint64
	Length    uint64
	LocalDesc uint64
	Peer      PeerID
	Context   uint64
}

// RecvOp is one posted receive buffer.
type RecvOp struct {
	Local     uint64
	Length    uint64
	LocalDesc uint64
	Context   uint64
}

// EventKind says what an Event reports.
type EventKind uint32

const (
	// EventWrite: a WriteOp (a write, or a read with WriteRead)
	// completed at the initiator.
	EventWrite EventKind = iota + 1
	// EventSend: a SendOp completed.
	EventSend
	// EventRecv: a RecvOp received Length bytes.
	EventRecv
	// EventImm: a peer's write carrying Imm landed here.
	EventImm
)

func (k EventKind) String() string {
	switch k {
	case EventWrite:
		return "write"
	case EventSend:
		return "send"
	case EventRecv:
		return "recv"
	case EventImm:
		return "imm"
	}
	return "event(?)"
}

// Event is one completion. Layout shared with C: pointer-free, 32 bytes.
type Event struct {
	Context uint64 // the op's Context (EventWrite, EventSend, EventRecv)
	Length  uint64 // received bytes (EventRecv)
	Kind    EventKind
	Imm     uint32 // the immediate (EventImm)
	// Errno is 0 on success, else the provider's positive error number;
	// Domain.DescribeError turns it into an error.
	Errno     int32
	ProvErrno int32
}

// Domain is one NIC endpoint. It is single-threaded: only the worker
// that opened it calls it, and it never blocks (except Close).
//
// The data path is batch-shaped, so a cgo provider crosses into C once per
// batch. Post methods post ops from the front of the slice until the
// provider is busy (EAGAIN, a full send queue) and return how many were
// accepted; the engine keeps the rest queued in order and retries after the
// next Poll. An error returned with n < len(ops) means ops[n] can never be
// posted: the engine fails that op's transfer and goes on with ops[n+1:].
// Everything that goes wrong after acceptance comes back as an Event with
// Errno set, exactly once per accepted op (on EventWrite, EventSend,
// EventRecv), including ops to a peer that can never be reached.
type Domain interface {
	// Info describes the domain; Address is its endpoint address.
	Info() DomainInfo
	Address() Address

	// RegisterMemory registers span; UnregisterMemory releases it.
	RegisterMemory(span MemorySpan, access Access) (MemoryKeys, error)
	UnregisterMemory(keys MemoryKeys) error

	// ResolvePeer returns the handle for a peer's address, creating
	// whatever the provider needs (address vector entry, queue pairs) the
	// first time. Connection setup may finish later; ops posted meanwhile
	// are accepted and held by the domain.
	ResolvePeer(addr Address) (PeerID, error)

	PostWrites(ops []WriteOp) (int, error)
	PostSends(ops []SendOp) (int, error)
	PostRecvs(ops []RecvOp) (int, error)

	// Poll progresses the provider and stores up to len(events)
	// completions. It returns an error only when the domain has failed as a
	// whole; the engine then fails everything on it.
	Poll(events []Event) (int, error)

	// DescribeError turns an Event with Errno set into an error wrapping
	// ErrProvider (and ErrTimeout for deadlines).
	DescribeError(ev Event) error

	// Close releases everything the domain holds. Pending ops are dropped;
	// the engine drains what it can before calling it.
	Close() error
}

// Sleeper is an optional interface of domains whose peers can wake a
// sleeping worker: shared-memory providers, where nothing else would (a
// peer's write lands without any event the kernel knows of). Before an
// adaptive worker sleeps it calls PrepareSleep on each such domain; after
// it woke it calls Awake on each domain it prepared.
type Sleeper interface {
	// WakeFD is a descriptor that turns readable when a peer wants the
	// worker; the worker waits on it while asleep and never reads it.
	WakeFD() int
	// PrepareSleep asks peers to wake the worker from now on. It returns
	// false, leaving nothing armed, when work already waits.
	PrepareSleep() bool
	// Awake tells peers the worker polls again and clears WakeFD.
	Awake()
}

// Provider opens domains of one kind. Implementations register with
// Register from an init function, as database/sql drivers do.
type Provider interface {
	// Name is the registry name: "libfabric", "verbs", "null".
	Name() string
	// Transports lists the transport names this provider serves ("efa",
	// "tcp;ofi_rxm", ...), each explicitly: a name is served by one
	// provider at most (Register panics otherwise), so it means the same
	// code in every program that links the same providers.
	Transports() []string
	// Domains lists the domains of transport usable on this machine. An
	// error wrapping ErrNotSupported means there are none.
	Domains(transport string, opts DomainOptions) ([]DomainInfo, error)
	// Open opens one domain.
	Open(info DomainInfo, opts DomainOptions) (Domain, error)
}

// LibraryReporter is implemented by providers that run on a native
// library whose version matters to their users (libfabric): Engine.Info
// and the metrics report it.
type LibraryReporter interface {
	Library() LibraryInfo
}

// LibraryInfo names the native library a provider runs on.
type LibraryInfo struct {
	Name    string // "libfabric"
	Version string // the library loaded, "2.1"
	API     string // the API version the provider asks it for, "2.1"
}

// PeerChecker is implemented by domains that can tell cheaply, without
// posting anything, that a peer is gone for good (shm: the process behind
// the peer's endpoint has exited). The worker calls it for the peers it
// recently sent to or watches, every Config.LivenessInterval; at once for
// the peer of an op that failed for the peer's fault (gone for good, or
// lost for a while); and for all its peers when a completion names no
// operation or another peer was found gone. A provider that reports an op
// failed for a dead peer must report that peer here from then on.
type PeerChecker interface {
	// CheckPeer returns nil while p may be alive, else an error wrapping
	// ErrPeerLost: nothing posted to p will ever complete, and the engine
	// abandons it.
	CheckPeer(p PeerID) error
}

// PeerProber is implemented by domains that have a harmless heartbeat: a
// write a live peer ignores. The worker posts one to each peer it watches
// (Engine.WatchPeer) every Config.LivenessInterval; a dead peer then shows
// through the provider's connection errors or refusals, as it would for
// any op.
type PeerProber interface {
	// ProbeOp returns the heartbeat write to p (Length 0, no WriteHasImm;
	// the engine sets Context), or false when there is none.
	ProbeOp(p PeerID) (WriteOp, bool)
}

// ProgressReporter is implemented by domains whose calls can do long
// work themselves, copying bytes (mem, ipc): Progress is a counter of the
// bytes they moved, which grows during such a call, read by the watchdog
// from its own goroutine (it must be safe for that). A worker inside one
// call for longer than Config.StuckTimeout is given up on only when this
// counter did not move for that long either: a slow copy is progress, a
// call that moves nothing is stuck.
type ProgressReporter interface {
	Progress() uint64
}

// Abandoner is implemented by domains that cannot safely be closed while
// the provider still holds operations or a connection stopped moving.
// When a worker's close drain ends with operations it could not reap, or
// a peer of the domain stopped answering without its connection being
// reset (unanswered heartbeats, posts refused for the handshake timeout),
// the engine calls Abandon instead of Close: the domain releases what it safely can, leaves the rest open and
// returns an error saying so (it is part of Engine.Close's error).
type Abandoner interface {
	Abandon() error
}
