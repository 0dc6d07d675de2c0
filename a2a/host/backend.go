package host

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/fabric"
)

// Exchanger all-gathers one message per rank over the whole world, in rank
// order (rendezvous.Group does).
type Exchanger interface {
	AllGather(ctx context.Context, data []byte) ([][]byte, error)
}

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
}

// Backend is the host-memory a2a backend of one rank. Make it with New and
// hand it to a2a.New, which drives it.
type Backend struct {
	l    a2a.Layout
	eng  *fabric.Engine
	node NodeMemory
	me   int // node-local index
	base int // first rank of the domain

	send, recv [][]byte // per node-local rank
	table      *fabric.HostBuffer
	words      []uint32 // the table, as the planner reads it
	regs       []*fabric.MemoryRegion
	sendReg    *fabric.MemoryRegion
	tableReg   *fabric.MemoryRegion
	recvDesc   []fabric.Descriptor // per rank
	tableDesc  []fabric.Descriptor // per rank
	nodeDsts   []fabric.Descriptor // node peers' receive buffers (signals)
	allDsts    []fabric.Descriptor // every other rank's receive buffer (barriers)
	counters   [numTags]*fabric.ImmCounter

	// Targets of the scatters of one iteration. The engine shares (does not
	// copy) them, so each is rewritten only after its transfer completed.
	routeT, eagerT, overT, combT []fabric.ScatterTarget
	// Peer groups for the scatters whose target list is the same every
	// iteration: the engine resolves their addresses once.
	routeG, eagerG, combG fabric.PeerGroup

	posted int64 // transfers posted so far
	done   fabric.TransferCounter
	acc    []float32
	w      *worker
	closed bool
}

var _ a2a.Backend = (*Backend)(nil)

const numTags = int(a2a.TagNodeCombine) + 1

// New builds rank cfg.Rank's backend: it shares buffers with its domain,
// registers them and the count table with the engine, creates the
// immediate counters and exchanges descriptors with every rank (so all
// ranks call New together). On error everything done is undone.
func New(ctx context.Context, cfg a2a.Config, opt Options) (_ *Backend, err error) {
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	if opt.Engine == nil || opt.Exchange == nil || opt.Node == nil {
		return nil, fmt.Errorf("a2a host backend: engine, exchange and node are required: %w", a2a.ErrInvalidArgument)
	}
	if n := opt.Engine.NICs(); n != l.NICsPerGPU {
		return nil, fmt.Errorf("a2a host backend: engine has %d nics, config %d: %w", n, l.NICsPerGPU, a2a.ErrInvalidArgument)
	}
	b := &Backend{l: l, eng: opt.Engine, node: opt.Node, acc: make([]float32, l.Hidden)}
	defer func() {
		if err != nil {
			_ = b.Close()
		}
	}()
	b.base = l.Node(l.Rank) * l.NVLinkSize
	b.me = l.Rank - b.base
	b.send, b.recv, err = opt.Node.Share(ctx, int(l.SendBytes), int(l.RecvBytes))
	if err != nil {
		return nil, fmt.Errorf("a2a host backend: share node buffers: %w", err)
	}
	if b.table, err = fabric.AllocHost(l.CountTableBytes); err != nil {
		return nil, err
	}
	tb := b.table.Bytes()
	b.words = unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(tb))), len(tb)/4)

	reg := func(p []byte, access fabric.Access) (*fabric.MemoryRegion, error) {
		span := fabric.MemorySpan{Addr: uintptr(unsafe.Pointer(unsafe.SliceData(p))), Len: uint64(len(p)),
			Device: fabric.HostDevice, DmabufFD: -1}
		r, err := b.eng.Register(span, access)
		if err == nil {
			b.regs = append(b.regs, r)
		}
		return r, err
	}
	if b.sendReg, err = reg(b.send[b.me], fabric.AccessLocal); err != nil {
		return nil, err
	}
	recvReg, err := reg(b.recv[b.me], fabric.AccessRemoteWrite)
	if err != nil {
		return nil, err
	}
	if b.tableReg, err = reg(tb, fabric.AccessRemoteWrite); err != nil {
		return nil, err
	}
	// Counters exist before any peer can learn where to write.
	for t := range b.counters {
		if b.counters[t], err = b.eng.ImmCounter(l.Imm(a2a.Tag(t))); err != nil {
			return nil, err
		}
	}
	rd, _ := recvReg.Descriptor()
	td, _ := b.tableReg.Descriptor()
	msg, err := encodeDescs(rd, td)
	if err != nil {
		return nil, err
	}
	all, err := opt.Exchange.AllGather(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("a2a host backend: exchange descriptors: %w", err)
	}
	if len(all) != l.WorldSize {
		return nil, fmt.Errorf("a2a host backend: exchange returned %d ranks, want %d: %w", len(all), l.WorldSize, a2a.ErrInvalidArgument)
	}
	b.recvDesc = make([]fabric.Descriptor, l.WorldSize)
	b.tableDesc = make([]fabric.Descriptor, l.WorldSize)
	for q, m := range all {
		if b.recvDesc[q], b.tableDesc[q], err = decodeDescs(m); err != nil {
			return nil, fmt.Errorf("a2a host backend: descriptors of rank %d: %w", q, err)
		}
		if q == l.Rank {
			continue
		}
		b.allDsts = append(b.allDsts, b.recvDesc[q])
		if l.Node(q) == l.Node(l.Rank) {
			b.nodeDsts = append(b.nodeDsts, b.recvDesc[q])
		}
	}
	b.routeT = make([]fabric.ScatterTarget, 0, l.Groups)
	b.eagerT = make([]fabric.ScatterTarget, 0, l.WorldSize)
	b.overT = make([]fabric.ScatterTarget, 0, l.WorldSize)
	b.combT = make([]fabric.ScatterTarget, 0, l.WorldSize)
	if err := b.addGroups(); err != nil {
		return nil, err
	}
	b.startWorker()
	return b, nil
}

// addGroups registers the fixed target lists with the engine, in the
// order the planner lists them: route targets by group, eager targets by
// rank, combine targets by group then replica.
func (b *Backend) addGroups() error {
	l := &b.l
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
	add := func(ranks []int, descs []fabric.Descriptor) (fabric.PeerGroup, error) {
		if len(ranks) == 0 {
			return fabric.PeerGroup{}, nil
		}
		peers := make([][]fabric.Address, len(ranks))
		for i, q := range ranks {
			for _, k := range descs[q].NICs {
				peers[i] = append(peers[i], k.Addr)
			}
		}
		return b.eng.AddPeerGroup(fabric.HostDevice, peers)
	}
	var err error
	if b.routeG, err = add(routes, b.tableDesc); err != nil {
		return err
	}
	if b.eagerG, err = add(eager, b.recvDesc); err != nil {
		return err
	}
	b.combG, err = add(comb, b.recvDesc)
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

// Close unregisters and frees everything, after waiting (briefly) for
// transfers still in flight. It is idempotent.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.stopWorker()
	ctx, cancel := context.WithTimeout(context.Background(), closeDrain)
	defer cancel()
	_ = b.done.Wait(ctx, b.posted)
	var errs []error
	for t, c := range b.counters {
		if c != nil {
			b.eng.RemoveImmCount(b.l.Imm(a2a.Tag(t)))
		}
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
