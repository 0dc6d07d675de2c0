package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/fabric"
)

// Exchanger all-gathers one message per rank over the whole world, in rank
// order (rendezvous.Group does).
type Exchanger interface {
	AllGather(ctx context.Context, data []byte) ([][]byte, error)
}

// NumTags is the number of immediate tags a context uses.
const NumTags = int(a2a.TagNodeCombine) + 1

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
}

// Wiring is one rank's fabric wiring. See the package documentation.
type Wiring struct {
	l        *a2a.Layout
	eng      *fabric.Engine
	sendReg  *fabric.MemoryRegion
	tableReg *fabric.MemoryRegion

	recvDesc  []fabric.Descriptor // per rank
	tableDesc []fabric.Descriptor // per rank
	nodeDsts  []fabric.Descriptor // node peers' receive buffers (signals)
	allDsts   []fabric.Descriptor // every other rank's receive buffer (barriers)
	counters  [NumTags]*fabric.ImmCounter
	flags     [NumTags]*fabric.FlagCounter

	// Targets of the scatters of one iteration. The engine shares (does not
	// copy) them, so each is rewritten only after its transfer completed.
	routeT, eagerT, overT, combT []fabric.ScatterTarget
	// Peer groups for the scatters whose target list is the same every
	// iteration: the engine resolves their addresses once.
	routeG, eagerG, combG fabric.PeerGroup

	posted int64 // transfers posted so far
	done   fabric.TransferCounter
	closed bool

	// rankOf names the rank behind each peer address, so a lost peer can
	// be reported as a rank; unwatch ends the counters' watches.
	rankOf  map[fabric.Address]int
	unwatch []func()
}

// New creates the counters and exchanges descriptors with every rank (so
// all ranks call New together). On error everything it did is undone.
func New(ctx context.Context, l *a2a.Layout, o Options) (_ *Wiring, err error) {
	if o.Engine == nil || o.Exchange == nil || o.Send == nil || o.Recv == nil || o.Table == nil {
		return nil, fmt.Errorf("a2a wiring: engine, exchange and regions are required: %w", a2a.ErrInvalidArgument)
	}
	w := &Wiring{l: l, eng: o.Engine, sendReg: o.Send, tableReg: o.Table}
	defer func() {
		if err != nil {
			_ = w.Close()
		}
	}()
	// Counters exist before any peer can learn where to write.
	for t := range w.counters {
		imm := l.Imm(a2a.Tag(t))
		if f, ok := o.Flags[a2a.Tag(t)]; ok {
			if w.flags[t], err = w.eng.FlagCounter(imm, f); err != nil {
				return nil, err
			}
			continue
		}
		if w.counters[t], err = w.eng.ImmCounter(imm); err != nil {
			return nil, err
		}
	}
	rd, _ := o.Recv.Descriptor()
	td, _ := o.Table.Descriptor()
	msg, err := encodeDescs(rd, td)
	if err != nil {
		return nil, err
	}
	all, err := o.Exchange.AllGather(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("a2a wiring: exchange descriptors: %w", err)
	}
	if len(all) != l.WorldSize {
		return nil, fmt.Errorf("a2a wiring: exchange returned %d ranks, want %d: %w", len(all), l.WorldSize, a2a.ErrInvalidArgument)
	}
	w.recvDesc = make([]fabric.Descriptor, l.WorldSize)
	w.tableDesc = make([]fabric.Descriptor, l.WorldSize)
	for q, m := range all {
		if w.recvDesc[q], w.tableDesc[q], err = decodeDescs(m); err != nil {
			return nil, fmt.Errorf("a2a wiring: descriptors of rank %d: %w", q, err)
		}
		if q == l.Rank {
			continue
		}
		w.allDsts = append(w.allDsts, w.recvDesc[q])
		if l.Node(q) == l.Node(l.Rank) {
			w.nodeDsts = append(w.nodeDsts, w.recvDesc[q])
		}
	}
	if err := w.watchRanks(); err != nil {
		return nil, err
	}
	w.eagerT = make([]fabric.ScatterTarget, 0, l.WorldSize)
	w.overT = make([]fabric.ScatterTarget, 0, l.WorldSize)
	w.combT = make([]fabric.ScatterTarget, 0, l.WorldSize)
	if err := w.addGroups(o.Device); err != nil {
		return nil, err
	}
	return w, nil
}

// addGroups registers the fixed target lists with the engine, in the
// order the planner lists them: route targets by group, eager targets by
// rank, combine targets by group then replica. The route targets are the
// same every iteration (each rank's count row goes to the same row of the
// same peers' tables), so they are built once here.
func (w *Wiring) addGroups(dev fabric.Device) error {
	l := w.l
	var routes, eager, comb []int
	for h := 0; h < l.Groups; h++ {
		if h != l.Group(l.Rank) {
			routes = append(routes, h*l.ReplicaSize+l.Replica(l.Rank))
		}
		if l.Node(h*l.ReplicaSize) != l.Node(l.Rank) {
			for q := h * l.ReplicaSize; q < (h+1)*l.ReplicaSize; q++ {
				comb = append(comb, q)
			}
		}
	}
	for q := l.Replica(l.Rank); q < l.WorldSize; q += l.ReplicaSize {
		if l.Node(q) != l.Node(l.Rank) {
			eager = append(eager, q)
		}
	}
	RW, g := l.RowWords, l.Group(l.Rank)
	off := uint64(g * RW * 4)
	for _, q := range routes {
		w.routeT = append(w.routeT, fabric.ScatterTarget{Dst: w.tableDesc[q], Length: uint64(RW * 4), SrcOffset: off, DstOffset: off})
	}
	add := func(d fabric.Device, ranks []int, descs []fabric.Descriptor) (fabric.PeerGroup, error) {
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
	if w.routeG, err = add(fabric.HostDevice, routes, w.tableDesc); err != nil {
		return err
	}
	if w.eagerG, err = add(dev, eager, w.recvDesc); err != nil {
		return err
	}
	w.combG, err = add(dev, comb, w.recvDesc)
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
	ctx, cancel := context.WithTimeout(context.Background(), closeDrain)
	defer cancel()
	// A transfer that does not finish in time is abandoned: the caller
	// is tearing down, and the engine reports it when it closes.
	_ = w.done.Wait(ctx, w.posted)
	for _, stop := range w.unwatch {
		stop()
	}
	for t := range w.counters {
		if w.counters[t] != nil || w.flags[t] != nil {
			w.eng.RemoveImmCount(w.l.Imm(a2a.Tag(t)))
		}
	}
	return nil
}

// ErrNoCounter is a Wait on a flag tag or an Arm on a credit tag.
var ErrNoCounter = errors.New("a2a wiring: no counter of that kind for the tag")
