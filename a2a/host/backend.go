package host

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/rows"
	"github.com/ferryrdma/ferry/a2a/internal/wire"
	"github.com/ferryrdma/ferry/fabric"
)

// Exchanger all-gathers one message per rank over the whole world, in rank
// order (rendezvous.Group does).
type Exchanger = wire.Exchanger

// Options are what a Backend runs on.
type Options struct {
	// Engine moves the bytes between domains. Its groups must have
	// Config.NICsPerGPU NICs. The backend registers its counters for the
	// Config's immediate values on it, so contexts sharing an engine need
	// disjoint ImmBase ranges.
	Engine *fabric.Engine
	// Exchange reaches every rank of the world, to publish descriptors.
	Exchange Exchanger
	// Node shares buffers within this rank's domain.
	Node NodeMemory
	// Timeout bounds every wait for the other ranks, in the calls (on top
	// of their context) and in the backend's worker (count exchange,
	// barriers): a rank that stops answering fails the others' calls
	// within it, with an error naming the rank (a2a.RankError) as soon as
	// the engine declares it lost. 0 means DefaultTimeout.
	Timeout time.Duration
	// Join builds the backend of a restarted rank joining a running world:
	// New shares node memory and registers its buffers but exchanges
	// nothing (Exchange may be nil); its Context's first call is then
	// SetActiveRanks with a Membership whose Exchange reaches the members
	// (a2a.Context.SetActiveRanks). When Node is a NodeRejoiner, New
	// allocates this rank's buffers alone (NodeRejoiner.Alloc) and the
	// rank maps its node peers' buffers, and they its own, during that
	// call, so it may come back while they stayed active; otherwise its
	// whole domain must restart with it (Share meets every member).
	Join bool
	// ReduceThreads is how many goroutines combine's weighted sum splits
	// a call's tokens over, the caller's included; 0 or 1: the caller's
	// alone. More pays where the machine has cores that no rank or engine
	// worker keeps busy (each rank's process splits its own tokens), so
	// New takes at most this rank's share of the CPUs it may run on
	// (runtime.NumCPU over the ranks of its domain, which share the
	// host): on a machine with no spare cores the caller reduces alone.
	ReduceThreads int
	// Doorbells says when signals go to doorbells in the peers' memory
	// and token rows are shared, where the transport lends its mappings
	// (ipc; see the package documentation). Every rank must be given the
	// same.
	Doorbells Doorbells
}

// Doorbells is Options.Doorbells.
type Doorbells uint8

const (
	// DoorbellsAuto uses them unless the members outnumber the CPUs of
	// the member with fewest (each rank's count travels with its
	// descriptors): ranks that must take turns on cores wait better
	// asleep on the engine's counters.
	DoorbellsAuto Doorbells = iota
	// DoorbellsOn uses them however many CPUs there are.
	DoorbellsOn
	// DoorbellsOff keeps every signal and row on the engine's path (for
	// comparisons).
	DoorbellsOff
)

// reduceThreads is how many goroutines a rank's reduction may use: what
// was asked, at most the rank's share of cpus among the domain's ranks
// (at least 1). More would only take turns on the same cores with the
// other ranks and their engine workers.
func reduceThreads(asked, cpus, domain int) int {
	share := max(1, cpus/max(1, domain))
	return max(1, min(asked, share))
}

// DefaultTimeout is Options.Timeout's default.
const DefaultTimeout = 30 * time.Second

// Backend is the host-memory a2a backend of one rank. Make it with New and
// hand it to a2a.New, which drives it.
type Backend struct {
	l    a2a.Layout
	eng  *fabric.Engine
	node NodeMemory
	rej  NodeRejoiner // node, when it can take back a restarted member; else nil
	me   int          // node-local index
	// inc names this rank's buffers (0: shared at New), peerInc the
	// buffers it maps of each node peer (unknownIncarnation: none): see
	// rejoin.go.
	inc     uint64
	peerInc []uint64
	base    int // first rank of the domain

	send, recv [][]byte // per node-local rank
	table      *fabric.HostBuffer
	words      []uint32 // the table, as the planner reads it
	regs       []*fabric.MemoryRegion
	wire       *wire.Wiring

	reduce *rows.Reducer
	// Copies that stay on this rank travel from the caller's input to its
	// output (phases.go): din and cin are the inputs of the iteration's
	// send calls until the receive calls return; selfTok and selfPad map
	// such a copy's row (past the rank's own segment start) to its token
	// and to its expert-output row; selfLo, selfHi bound those rows
	// during CombineRecv, whose Reduce reads rows through combineRow.
	din            *a2a.DispatchInput
	cin            *a2a.CombineInput
	selfTok        []int32
	selfPad        []int32
	selfLo, selfHi int32
	combineRow     func(pos int32) []byte
	// The iteration's writes to peers of other domains, as posted: the
	// plan's, with zero rows where the rows were stored straight into the
	// peer's receive buffer (direct, per rank; cdst, per combine write).
	eagerT, overT, combT []a2a.Transfer
	direct, cdst         [][]byte
	sh                   shared
	w                    *worker
	timeout              time.Duration
	joining              bool
	closed               bool
}

var _ a2a.MembershipBackend = (*Backend)(nil)

// New builds rank cfg.Rank's backend: it shares buffers with its domain,
// registers them and the count table with the engine, creates the
// immediate counters and exchanges descriptors with every rank (so all
// ranks call New together). On error everything done is undone.
func New(ctx context.Context, cfg a2a.Config, opt Options) (_ *Backend, err error) {
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	if opt.Engine == nil || (opt.Exchange == nil && !opt.Join) || opt.Node == nil {
		return nil, fmt.Errorf("a2a host backend: engine, exchange and node are required: %w", a2a.ErrInvalidArgument)
	}
	if n := opt.Engine.NICs(); n != l.NICsPerGPU {
		return nil, fmt.Errorf("a2a host backend: engine has %d nics, config %d: %w", n, l.NICsPerGPU, a2a.ErrInvalidArgument)
	}
	b := &Backend{l: l, eng: opt.Engine, node: opt.Node, timeout: opt.Timeout,
		joining: opt.Join}
	if b.timeout <= 0 {
		b.timeout = DefaultTimeout
	}
	defer func() {
		if err != nil {
			_ = b.Close()
		}
	}()
	b.selfTok = make([]int32, l.MaxCopiesFrom)
	b.selfPad = make([]int32, l.MaxCopiesFrom)
	b.combineRow = b.resultRow
	b.direct, b.cdst = make([][]byte, l.WorldSize), make([][]byte, l.WorldSize)
	b.eagerT = make([]a2a.Transfer, 0, l.WorldSize)
	b.overT = make([]a2a.Transfer, 0, l.WorldSize)
	b.combT = make([]a2a.Transfer, 0, l.WorldSize)
	b.initShared()
	b.reduce = rows.NewReducer(&b.l, reduceThreads(opt.ReduceThreads, runtime.NumCPU(), l.NVLinkSize))
	b.base = l.Node(l.Rank) * l.NVLinkSize
	b.me = l.Rank - b.base
	b.rej, _ = opt.Node.(NodeRejoiner)
	b.peerInc = make([]uint64, l.NVLinkSize)
	if opt.Join && b.rej != nil {
		b.inc = newIncarnation()
		for i := range b.peerInc {
			b.peerInc[i] = unknownIncarnation
		}
		b.peerInc[b.me] = b.inc
		b.send, b.recv, err = b.rej.Alloc(int(l.SendBytes), int(l.RecvBytes))
	} else {
		b.send, b.recv, err = opt.Node.Share(ctx, int(l.SendBytes), int(l.RecvBytes))
	}
	if err != nil {
		return nil, fmt.Errorf("a2a host backend: share node buffers: %w", err)
	}
	if b.table, err = fabric.AllocHost(wire.TableBytes(&b.l)); err != nil {
		return nil, err
	}
	tb := b.table.Bytes()
	b.words = unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(tb))), l.CountTableBytes/4)

	reg := func(p []byte, access fabric.Access) (*fabric.MemoryRegion, error) {
		span := fabric.MemorySpan{Addr: uintptr(unsafe.Pointer(unsafe.SliceData(p))), Len: uint64(len(p)),
			Device: fabric.HostDevice, DmabufFD: -1}
		r, err := b.eng.Register(span, access)
		if err == nil {
			b.regs = append(b.regs, r)
		}
		return r, err
	}
	sendReg, err := reg(b.send[b.me], fabric.AccessLocal)
	if err != nil {
		return nil, err
	}
	recvReg, err := reg(b.recv[b.me], fabric.AccessRemoteWrite)
	if err != nil {
		return nil, err
	}
	tableReg, err := reg(tb, fabric.AccessRemoteWrite)
	if err != nil {
		return nil, err
	}
	b.wire, err = wire.New(ctx, &b.l, wire.Options{Engine: b.eng, Exchange: opt.Exchange,
		Send: sendReg, Recv: recvReg, Table: tableReg, Device: fabric.HostDevice, Join: opt.Join,
		NodeRemaps: true, Doorbells: opt.Doorbells != DoorbellsOff, Crowded: opt.Doorbells == DoorbellsOn,
		TableMem: tb})
	if err != nil {
		return nil, err
	}
	if !opt.Join {
		b.startWorker()
	}
	return b, nil
}

// Joining reports whether the backend was built with Options.Join and has
// not joined yet.
func (b *Backend) Joining() bool { return b.joining }

// Quiesce stops the worker of the generation being given up and waits
// until every transfer this rank posted finished (those to a lost rank
// fail): a2a.MembershipBackend. Bounded by ctx and Options.Timeout.
func (b *Backend) Quiesce(ctx context.Context) error {
	if b.closed {
		return fmt.Errorf("a2a host backend: %w", a2a.ErrClosed)
	}
	ctx, cancel := b.bound(ctx)
	defer cancel()
	b.stopWorker()
	b.w = nil
	return b.wire.Quiesce(ctx)
}

// SetActive moves the wiring to the new generation's immediate values and
// the active ranks' targets, meets the members twice (wire.SetActive,
// Joined) and starts a new worker: a2a.MembershipBackend. With an
// Exchange, node peers that came back as new processes have their
// buffers mapped again in between (rejoin.go). Bounded by ctx and
// Options.Timeout.
func (b *Backend) SetActive(ctx context.Context, p *a2a.Planner, m *a2a.Membership) error {
	if b.w != nil {
		return fmt.Errorf("a2a host backend: set active ranks before quiescing: %w", a2a.ErrCallOrder)
	}
	ctx, cancel := b.bound(ctx)
	defer cancel()
	var nx *nodeExchange
	ex := m.Exchange
	if ex != nil && b.l.NVLinkSize > 1 {
		nx = &nodeExchange{inner: ex, b: b, gen: m.Generation}
		ex = nx
	}
	if ex == nil {
		for _, q := range p.Members().Node {
			if b.send[b.peer(q)] == nil {
				return fmt.Errorf("a2a host backend: rank %d: node peer %d's buffers are not mapped here (it restarted): an Exchange is needed: %w",
					b.l.Rank, q, a2a.ErrInvalidArgument)
			}
		}
	}
	if err := b.wire.SetActive(ctx, m.Generation, p.Members(), ex); err != nil {
		nx.withdraw()
		return err
	}
	// Everyone is quiet: nothing of the old generation lands any more,
	// and no member touches node memory, which may be mapped again now.
	// The host backend keeps no state peers write into besides the
	// counters (new) and the buffers (rewritten before they are read).
	if nx != nil {
		if err := b.remapNode(ctx, p.Members(), nx); err != nil {
			return err
		}
	}
	if err := b.wire.Joined(ctx); err != nil {
		return err
	}
	b.joining = false
	b.startWorker()
	return nil
}

// Close unregisters and frees everything, after waiting (briefly) for
// transfers still in flight. It is idempotent.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.stopWorker()
	if b.reduce != nil {
		b.reduce.Close()
	}
	var errs []error
	if b.wire != nil {
		errs = append(errs, b.wire.Close())
	}
	for _, r := range b.regs {
		if err := b.eng.Unregister(r); err != nil {
			errs = append(errs, err)
		}
	}
	if b.table != nil {
		errs = append(errs, b.table.Free())
	}
	if b.node != nil {
		errs = append(errs, b.node.Close())
	}
	return errors.Join(errs...)
}

// Traffic returns what tag's fabric writes carried since New:
// a2a.TrafficCounter.
func (b *Backend) Traffic(t a2a.Tag) a2a.Traffic { return b.wire.Traffic(t) }

var _ a2a.TrafficCounter = (*Backend)(nil)

// Doorbells returns how many signals this rank stored into a peer's
// doorbell (a count row with its signal, the signal that rows are
// written, a barrier or node signal) instead of posting a write through
// the engine: over a transport that lends its mappings of peers' memory
// (ipc), every signal from the first iteration on; elsewhere none.
func (b *Backend) Doorbells() uint64 { return b.wire.Rung() }
