package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/osyield"
)

// Exchanger all-gathers one message per rank over the whole world, in rank
// order (rendezvous.Group does); in a membership change, over the members.
type Exchanger = a2a.Exchanger

// NumTags is the number of immediate tags a context uses.
const NumTags = a2a.NumTags

// closeDrain bounds how long Close waits for transfers still in flight.
const closeDrain = 5 * time.Second

// Options are what a Wiring runs on.
type Options struct {
	Engine   *fabric.Engine
	Exchange Exchanger
	// Send and Recv are this rank's registered transport buffers (Recv
	// remotely writable), Table its registered count table (remotely
	// writable, in host memory).
	Send, Recv, Table *fabric.MemoryRegion
	// Device is the engine group the send buffer belongs to
	// (fabric.HostDevice for host memory).
	Device fabric.Device
	// Flags makes the counter of a tag a FlagCounter raising that flag
	// (Arm instead of Wait); tags not listed get credit counters.
	Flags map[a2a.Tag]fabric.Flag
	// Join builds the wiring of a rank that joins a running world: New
	// creates no counter and exchanges nothing; the first SetActive, with
	// an exchanger over the members, does both.
	Join bool
	// NodeRemaps says the backend maps a node peer's buffers again when
	// the peer comes back as a new process (a membership exchange brings
	// its new descriptors); without it such a peer is refused
	// (a2a.ErrNotSupported), its buffers being mapped once, at New.
	NodeRemaps bool
	// Doorbells lets signals to a peer whose count table the transport
	// lends skip the engine (doorbell.go). Table must then be
	// TableBytes long and TableMem this rank's mapping of it.
	Doorbells bool
	TableMem  []byte
	// Crowded keeps the doorbells on where the members outnumber the
	// CPUs (off by default then: see doorbell.go).
	Crowded bool
}

// Wiring is one rank's fabric wiring. See the package documentation.
type Wiring struct {
	l        *a2a.Layout
	eng      *fabric.Engine
	dev      fabric.Device
	sendReg  *fabric.MemoryRegion
	tableReg *fabric.MemoryRegion
	flagOf   map[a2a.Tag]fabric.Flag
	msg      []byte // this rank's descriptors, as exchanged
	remaps   bool   // Options.NodeRemaps

	gen       uint32              // membership generation: the bank of every immediate value
	wired     bool                // counters exist and descriptors are known
	descs     [][]byte            // per rank: its descriptors as exchanged (nil: unknown)
	recvDesc  []fabric.Descriptor // per rank
	tableDesc []fabric.Descriptor // per rank
	nodeDsts  []fabric.Descriptor // active node peers' receive buffers (signals)
	allDsts   []fabric.Descriptor // every other active rank's receive buffer (barriers)
	joinWait  int                 // join immediates one phase waits for
	active    []bool              // per rank: a member of the current generation
	counters  [NumTags]*fabric.ImmCounter
	flags     [NumTags]*fabric.FlagCounter

	// Targets of the scatters of one iteration. The engine shares (does not
	// copy) them, so each is rewritten only after its transfer completed.
	routeT, eagerT, overT, combT []fabric.ScatterTarget
	// Peer groups for the scatters whose target list is the same every
	// iteration: the engine resolves their addresses once.
	routeG, eagerG, combG fabric.PeerGroup

	traffic [NumTags]tagTraffic // what the writes of each tag moved

	// peerMem: per rank, its receive buffer as this process maps it, lent
	// by the transport (fabric.Engine.MapPeer; nil: not lent, or not
	// yet); held: those acquired by Direct until ReleaseDirect; noLend:
	// the transport lends none, so nobody asks again.
	peerMem []*fabric.PeerMemory
	held    []*fabric.PeerMemory
	noLend  bool
	crowdOK bool // Options.Crowded
	bell    bells
	// Ranks behind the target and destination lists (same order), and
	// what is left for the engine of each once bells are rung (per tag
	// for signals: the engine shares the lists until they complete).
	routeRanks, allRanks, nodeRanks          []int32
	routeLeft, eagerLeft, overLeft, combLeft []fabric.ScatterTarget
	sigLeft                                  [NumTags][]fabric.Descriptor
	pend                                     []int // per rank: credits to ring for the dispatch tag

	posted int64 // transfers posted this generation
	done   *fabric.TransferCounter
	closed bool

	// rankOf names the rank behind each peer address, so a lost peer can
	// be reported as a rank; unwatch ends the counters' watches.
	rankOf  map[fabric.Address]int
	unwatch []func()
}

// New creates the counters and exchanges descriptors with every rank (so
// all ranks call New together), every rank active. With Options.Join it
// does neither: SetActive will. On error everything it did is undone.
func New(ctx context.Context, l *a2a.Layout, o Options) (_ *Wiring, err error) {
	if o.Engine == nil || o.Send == nil || o.Recv == nil || o.Table == nil || (o.Exchange == nil && !o.Join) {
		return nil, fmt.Errorf("a2a wiring: engine, exchange and regions are required: %w", a2a.ErrInvalidArgument)
	}
	w := &Wiring{l: l, eng: o.Engine, dev: o.Device, sendReg: o.Send, tableReg: o.Table, flagOf: o.Flags,
		remaps: o.NodeRemaps, done: new(fabric.TransferCounter), rankOf: make(map[fabric.Address]int),
		descs: make([][]byte, l.WorldSize), recvDesc: make([]fabric.Descriptor, l.WorldSize),
		tableDesc: make([]fabric.Descriptor, l.WorldSize), peerMem: make([]*fabric.PeerMemory, l.WorldSize)}
	defer func() {
		if err != nil {
			_ = w.Close()
		}
	}()
	if o.Doorbells {
		if len(o.TableMem) < TableBytes(l) {
			return nil, fmt.Errorf("a2a wiring: doorbells need a table of %d bytes, have %d: %w", TableBytes(l), len(o.TableMem), a2a.ErrInvalidArgument)
		}
		w.bell = bells{on: true, own: o.TableMem, peer: make([]*fabric.PeerMemory, l.WorldSize),
			miss: make([]uint32, l.WorldSize), yield: osyield.New()}
		w.pend = make([]int, l.WorldSize)
		w.crowdOK = o.Crowded
	}
	rd, _ := o.Recv.Descriptor()
	td, _ := o.Table.Descriptor()
	if w.msg, err = encodeDescs(rd, td); err != nil {
		return nil, err
	}
	// The CPUs this rank may run on ride after the descriptors (decodeDescs
	// ignores them): every member decides alike whether its host has a
	// core per rank (doorbell.go).
	w.msg = binary.LittleEndian.AppendUint32(w.msg, uint32(runtime.NumCPU()))
	w.eagerT = make([]fabric.ScatterTarget, 0, l.WorldSize)
	w.overT = make([]fabric.ScatterTarget, 0, l.WorldSize)
	w.combT = make([]fabric.ScatterTarget, 0, l.WorldSize)
	w.routeT = make([]fabric.ScatterTarget, 0, l.WorldSize)
	w.routeLeft = make([]fabric.ScatterTarget, 0, l.WorldSize)
	w.eagerLeft = make([]fabric.ScatterTarget, 0, l.WorldSize)
	w.overLeft = make([]fabric.ScatterTarget, 0, l.WorldSize)
	w.combLeft = make([]fabric.ScatterTarget, 0, l.WorldSize)
	if o.Join {
		return w, nil
	}
	p, err := a2a.NewPlanner(l.Config)
	if err != nil {
		return nil, err
	}
	if err := w.wireUp(ctx, p.Members(), o.Exchange); err != nil {
		return nil, err
	}
	return w, nil
}

// wireUp makes the counters of the current generation's bank, learns the
// descriptors (from ex, when not nil), watches the other active ranks and
// builds the target lists of m. Counters exist before any peer can learn
// where to write; a peer already writing (a membership change) has its
// immediates held by the engine until they do.
func (w *Wiring) wireUp(ctx context.Context, m *a2a.Members, ex Exchanger) error {
	for t := range w.counters {
		imm := w.imm(a2a.Tag(t))
		var err error
		if f, ok := w.flagOf[a2a.Tag(t)]; ok {
			if w.flags[t], err = w.eng.FlagCounter(imm, f); err != nil {
				return err
			}
			continue
		}
		if w.counters[t], err = w.eng.ImmCounter(imm); err != nil {
			return err
		}
	}
	w.wired = true
	// Descriptors may change with the membership (a rank rejoins with new
	// buffers): mappings are asked for again.
	clear(w.peerMem)
	clear(w.bell.peer)
	for q := range w.bell.miss {
		w.bell.miss[q] = ^uint32(0)
	}
	w.bell.iter = 0
	if ex != nil {
		if err := w.exchange(ctx, m, ex); err != nil {
			return err
		}
	}
	w.bell.crowded = !w.crowdOK && w.crowded(m)
	w.allDsts, w.nodeDsts = w.allDsts[:0], w.nodeDsts[:0]
	w.allRanks = append(w.allRanks[:0], m.Others...)
	w.nodeRanks = append(w.nodeRanks[:0], m.Node...)
	for _, q := range m.Others {
		w.allDsts = append(w.allDsts, w.recvDesc[q])
	}
	for _, q := range m.Node {
		w.nodeDsts = append(w.nodeDsts, w.recvDesc[q])
	}
	for t := range w.sigLeft {
		w.sigLeft[t] = make([]fabric.Descriptor, 0, len(w.allDsts))
	}
	w.joinWait = m.Count - 1
	w.active = append(w.active[:0], m.Active...)
	if err := w.watchRanks(m); err != nil {
		return err
	}
	if err := w.addGroups(m); err != nil {
		return err
	}
	if w.bell.on {
		return w.warmBells(ctx, m)
	}
	return nil
}

// exchange all-gathers this rank's descriptors over the members of m.
func (w *Wiring) exchange(ctx context.Context, m *a2a.Members, ex Exchanger) error {
	l := w.l
	all, err := ex.AllGather(ctx, w.msg)
	if err != nil {
		return fmt.Errorf("a2a wiring: exchange descriptors: %w", err)
	}
	if len(all) != m.Count {
		return fmt.Errorf("a2a wiring: exchange returned %d messages for %d members: %w", len(all), m.Count, a2a.ErrInvalidArgument)
	}
	i := 0
	for q := range l.WorldSize {
		if !m.Active[q] {
			continue
		}
		msg := all[i]
		i++
		if !w.remaps && q != l.Rank && w.descs[q] != nil && l.Node(q) == l.Node(l.Rank) && !bytes.Equal(msg, w.descs[q]) {
			return fmt.Errorf("a2a wiring: node peer %d came back with new buffers; node buffers are mapped once, at New: %w",
				q, a2a.ErrNotSupported)
		}
		if w.recvDesc[q], w.tableDesc[q], err = decodeDescs(msg); err != nil {
			return fmt.Errorf("a2a wiring: descriptors of rank %d: %w", q, err)
		}
		w.descs[q] = bytes.Clone(msg)
		if q == l.Rank {
			continue
		}
		for _, d := range []fabric.Descriptor{w.recvDesc[q], w.tableDesc[q]} {
			for _, k := range d.NICs {
				w.rankOf[k.Addr] = q
			}
		}
	}
	return nil
}

// imm is the immediate value of tag in the current generation's bank.
func (w *Wiring) imm(tag a2a.Tag) uint32 { return w.l.Imm(tag, w.gen) }

// addGroups registers the fixed target lists with the engine, in the
// order the planner lists them (Members): route targets and eager
// targets by rank, combine targets by group then replica. The route
// targets are the same every iteration (each rank's count row goes to the
// same row of the same peers' tables), so they are built here. The engine
// keeps one group per distinct list.
func (w *Wiring) addGroups(m *a2a.Members) error {
	l := w.l
	RW, g := l.RowWords, l.Group(l.Rank)
	off := uint64(g * RW * 4)
	w.routeT = w.routeT[:0]
	w.routeRanks = append(w.routeRanks[:0], m.Routes...)
	for _, q := range m.Routes {
		w.routeT = append(w.routeT, fabric.ScatterTarget{Dst: w.tableDesc[q], Length: uint64(RW * 4), SrcOffset: off, DstOffset: off})
	}
	add := func(d fabric.Device, ranks []int32, descs []fabric.Descriptor) (fabric.PeerGroup, error) {
		if len(ranks) == 0 {
			return fabric.PeerGroup{}, nil
		}
		peers := make([][]fabric.Address, len(ranks))
		for i, q := range ranks {
			for _, k := range descs[q].NICs {
				peers[i] = append(peers[i], k.Addr)
			}
		}
		return w.eng.AddPeerGroup(d, peers)
	}
	var err error
	if w.routeG, err = add(fabric.HostDevice, m.Routes, w.tableDesc); err != nil {
		return err
	}
	if w.eagerG, err = add(w.dev, m.Eager, w.recvDesc); err != nil {
		return err
	}
	w.combG, err = add(w.dev, m.Combine, w.recvDesc)
	return err
}

func encodeDescs(ds ...fabric.Descriptor) ([]byte, error) {
	var out []byte
	for _, d := range ds {
		enc, err := d.MarshalBinary()
		if err != nil {
			return nil, err
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(len(enc)))
		out = append(out, enc...)
	}
	return out, nil
}

func decodeDescs(m []byte) (recv, table fabric.Descriptor, err error) {
	for _, d := range []*fabric.Descriptor{&recv, &table} {
		if len(m) < 4 || int(binary.LittleEndian.Uint32(m)) > len(m)-4 {
			return recv, table, fmt.Errorf("truncated message: %w", fabric.ErrBadEncoding)
		}
		n := int(binary.LittleEndian.Uint32(m))
		if err := d.UnmarshalBinary(m[4 : 4+n]); err != nil {
			return recv, table, err
		}
		m = m[4+n:]
	}
	return recv, table, nil
}

// Close waits (briefly) for transfers still in flight and removes the
// counters. The regions belong to the caller. It is idempotent.
func (w *Wiring) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.ReleaseDirect()
	ctx, cancel := context.WithTimeout(context.Background(), closeDrain)
	defer cancel()
	// A transfer that does not finish in time is abandoned: the caller
	// is tearing down, and the engine reports it when it closes.
	_ = w.done.Wait(ctx, w.posted)
	w.unwire()
	return nil
}

// unwire ends the watches and removes the counters of the current bank.
func (w *Wiring) unwire() {
	for _, stop := range w.unwatch {
		stop()
	}
	w.unwatch = w.unwatch[:0]
	for t := range w.counters {
		if w.counters[t] != nil || w.flags[t] != nil {
			w.eng.RemoveImmCount(w.imm(a2a.Tag(t)))
		}
		w.counters[t], w.flags[t] = nil, nil
	}
	w.wired = false
}

// ErrNoCounter is a Wait on a flag tag or an Arm on a credit tag.
var ErrNoCounter = errors.New("a2a wiring: no counter of that kind for the tag")
