package main

import (
	"context"
	"fmt"

	"github.com/ferryrdma/ferry/fabric"
)

// Receive rings with credit immediates. A sender writes message k into
// slot k mod S of each receiver's ring, with an immediate naming the ring
// and the slot; the receiver counts that slot's immediates, reads the
// message, and returns one credit (a zero-byte write carrying only an
// immediate) when the slot may be reused. The sender takes one credit per
// receiver before it reuses a slot, so it runs at most S messages ahead
// and never overwrites one not yet read, with no other synchronisation.

// Immediate values: the kind of traffic, the sending rank, the slot.
const (
	kindRing   = 1 // rank r -> rank r+1: activations (and the token, to rank 0)
	kindGather = 2 // last rank -> every other rank: the final activation
	kindReduce = 3 // every rank -> every rank: all-reduce partials
	kindProbe  = 4 // the link probe
	creditFlag = 0x80
)

func immOf(kind, sender, slot int) uint32 {
	return uint32(kind)<<24 | uint32(sender)<<12 | uint32(slot)
}

// creditImm is the value receivers return credits with: a rank sends on
// at most one ring of each kind, so the kind alone names it.
func creditImm(kind int) uint32 { return immOf(kind|creditFlag, 0, 0) }

// ring places one ring in every rank's inbox region.
type ring struct {
	kind      int
	slots     int
	slotBytes int
	base      int // offset in the inbox region
}

func (r ring) slotOffset(slot int) int { return r.base + slot*r.slotBytes }

// outbox is the sending end of a ring: to one receiver (a single write,
// sharded over the NICs) or to several (one scatter, one immediate per
// receiver).
type outbox struct {
	e       *fabric.Engine
	ring    ring
	me      int
	dsts    []fabric.Descriptor
	credits *fabric.ImmCounter
	seq     int
	targets []fabric.ScatterTarget
}

func newOutbox(e *fabric.Engine, rg ring, me int, dsts []fabric.Descriptor) (*outbox, error) {
	cr, err := e.ImmCounter(creditImm(rg.kind))
	if err != nil {
		return nil, err
	}
	return &outbox{e: e, ring: rg, me: me, dsts: dsts, credits: cr, targets: make([]fabric.ScatterTarget, len(dsts))}, nil
}

// send writes n bytes of src at off as the next message; c reports when
// src may be reused.
func (o *outbox) send(ctx context.Context, src *fabric.MemoryRegion, off, n int, c fabric.Completion) error {
	if n > o.ring.slotBytes {
		return fmt.Errorf("message of %d bytes, slots of %d: %w", n, o.ring.slotBytes, fabric.ErrTooLarge)
	}
	if o.seq >= o.ring.slots {
		// The slot still holds message seq-S: wait until every receiver
		// has handed it back.
		if err := o.credits.Wait(ctx, int64(len(o.dsts))); err != nil {
			return fmt.Errorf("waiting for ring credit: %w", err)
		}
	}
	slot := o.seq % o.ring.slots
	o.seq++
	imm := immOf(o.ring.kind, o.me, slot)
	if len(o.dsts) == 1 {
		return o.e.SubmitSingle(fabric.SingleWrite{Src: src, SrcOffset: uint64(off), Length: uint64(n),
			Dst: o.dsts[0], DstOffset: uint64(o.ring.slotOffset(slot)), Imm: fabric.Immediate(imm)}, c)
	}
	for i, d := range o.dsts {
		o.targets[i] = fabric.ScatterTarget{Dst: d, Length: uint64(n), SrcOffset: uint64(off), DstOffset: uint64(o.ring.slotOffset(slot))}
	}
	return o.e.SubmitScatter(fabric.ScatterWrite{Src: src, Targets: o.targets, Imm: fabric.Immediate(imm)}, c)
}

// inbox is the receiving end of a ring in this rank's inbox region.
type inbox struct {
	e        *fabric.Engine
	ring     ring
	mem      []byte // the inbox region
	from     fabric.Descriptor
	counters []*fabric.ImmCounter
	perMsg   int64 // immediates one message delivers
	seq      int
	credits  fabric.TransferCounter // the credits sent back
}

// newInbox opens the ring from sender (whose inbox region is from, where
// credits go). perMsg is the number of immediates one message brings.
func newInbox(e *fabric.Engine, rg ring, mem []byte, sender int, from fabric.Descriptor, perMsg int) (*inbox, error) {
	in := &inbox{e: e, ring: rg, mem: mem, from: from, perMsg: int64(perMsg)}
	for s := range rg.slots {
		c, err := e.ImmCounter(immOf(rg.kind, sender, s))
		if err != nil {
			return nil, err
		}
		in.counters = append(in.counters, c)
	}
	return in, nil
}

// recv waits for the next message and returns its slot (valid until
// release).
func (in *inbox) recv(ctx context.Context) ([]byte, error) {
	slot := in.seq % in.ring.slots
	if err := in.counters[slot].Wait(ctx, in.perMsg); err != nil {
		return nil, fmt.Errorf("waiting for message %d: %w", in.seq, err)
	}
	off := in.ring.slotOffset(slot)
	return in.mem[off : off+in.ring.slotBytes], nil
}

// drain waits until every credit sent has completed.
func (in *inbox) drain(ctx context.Context) error {
	if err := in.credits.Wait(ctx, int64(in.seq)); err != nil {
		return err
	}
	return in.credits.Err()
}

// release hands the slot of the message recv returned back to the sender.
func (in *inbox) release() error {
	in.seq++
	if err := in.credits.Err(); err != nil {
		return fmt.Errorf("a credit failed: %w", err)
	}
	return in.e.SubmitImm(fabric.ImmWrite{Imm: creditImm(in.ring.kind), Dst: in.from}, fabric.Count(&in.credits))
}
