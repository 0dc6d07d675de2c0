package main

import (
	"context"
	"fmt"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/job"
)

// The dispatcher keeps every tensor's placement and turns each client
// request into worker commands. It never touches tensor bytes in direct
// mode; in relay mode (how GT moves tensors today) every move goes source
// -> dispatcher -> destination, and the dispatcher waits for each move's
// bytes before it forwards them and before it handles anything else.

type placement uint8

const (
	whole      placement = iota // on one worker
	sharded                     // shard w on worker w
	replicated                  // the whole tensor on every worker, at one offset
)

type tensorInfo struct {
	kind   placement
	elems  int
	worker int   // whole
	offs   []int // whole: [0]; sharded: per worker; replicated: [0]
}

// pendingOp is a request waiting for its workers' acks.
type pendingOp struct {
	client     uint8
	clientOp   uint32
	acks       int
	sum        uint64
	replicated bool     // every worker acks the whole result's checksum
	sums       []uint64 // those checksums, to compare
	release    []func() // temporaries to free when the op is done
}

type dispatcher struct {
	r       *job.Rank
	c       config
	t       *topology
	mb      *mailbox
	snd     *sender
	relay   bool
	staging *job.Buffer
	tensors map[uint32]*tensorInfo
	arenas  []arena
	pending map[uint32]*pendingOp
	ops     uint32 // dispatcher op numbers
	imms    uint32
	next    int // round-robin placement of whole tensors
	stats   dispatchStats
}

// dispatchStats is what went through the dispatcher in one phase.
type dispatchStats struct {
	DataBytes    int64 `json:"data_bytes"`    // tensor bytes in and out (relay)
	ControlBytes int64 `json:"control_bytes"` // control messages in and out
	Moves        int   `json:"moves"`
}

func (d *dispatcher) imm() uint32 { d.imms++; return 0x40000000 | d.imms&0x3FFFFFFF }

func (d *dispatcher) cmd(ctx context.Context, w int, m msg) error { return d.snd.send(ctx, 1+w, m) }

// run serves one phase: requests until the client rank says the phase is
// over and every op has finished, then ends the phase on every worker.
func (d *dispatcher) run(ctx context.Context) (dispatchStats, error) {
	d.tensors, d.pending = map[uint32]*tensorInfo{}, map[uint32]*pendingOp{}
	d.arenas = make([]arena, d.t.workers)
	for w := range d.arenas {
		d.arenas[w] = arena{size: d.c.Arena}
	}
	d.stats = dispatchStats{}
	inBefore, outBefore := d.mb.bytes, d.snd.bytes
	ending := false
	for !ending || len(d.pending) > 0 {
		m, err := d.mb.next(ctx)
		if err != nil {
			return d.stats, err
		}
		switch m.Kind {
		case ackDone:
			err = d.acked(ctx, m)
		case reqPhaseEnd:
			ending = true
		default:
			err = d.request(ctx, m)
		}
		if err != nil {
			return d.stats, err
		}
	}
	for w := range d.t.workers {
		if err := d.cmd(ctx, w, msg{Kind: cmdPhaseEnd}); err != nil {
			return d.stats, err
		}
	}
	d.stats.ControlBytes = d.mb.bytes - inBefore + d.snd.bytes - outBefore
	return d.stats, nil
}

// begin registers a dispatcher op that finishes after acks acks.
func (d *dispatcher) begin(m msg, acks int) (uint32, *pendingOp) {
	d.ops++
	p := &pendingOp{client: m.Client, clientOp: m.Op, acks: acks}
	d.pending[d.ops] = p
	return d.ops, p
}

func (d *dispatcher) reply(ctx context.Context, client uint8, op uint32, sum uint64, status uint8) error {
	return d.snd.send(ctx, d.t.clientRank, msg{Kind: repDone, Client: client, Op: op, Sum: sum, Flag: status})
}

func (d *dispatcher) acked(ctx context.Context, m msg) error {
	p, ok := d.pending[m.Op]
	if !ok {
		return fmt.Errorf("ack for unknown op %d", m.Op)
	}
	p.sum += m.Sum
	p.sums = append(p.sums, m.Sum)
	if p.acks--; p.acks > 0 {
		return nil
	}
	delete(d.pending, m.Op)
	for _, f := range p.release {
		f()
	}
	// Pieces (shards) ack their checksums, which add up to the whole's; a
	// replicated result is acked whole by every worker, and all must agree.
	status, sum := uint8(statusOK), p.sum
	if p.replicated {
		sum = p.sums[0]
		for _, s := range p.sums {
			if s != sum {
				status = statusMismatch
			}
		}
	}
	return d.reply(ctx, p.client, p.clientOp, sum, status)
}

// move copies n bytes at off on worker src to dstOff on every worker in
// mask, with imm on the data at the destinations.
func (d *dispatcher) move(ctx context.Context, src int, off, n int, mask uint64, dstOff int, imm uint32) error {
	d.stats.Moves++
	if !d.relay {
		// Direct: the source writes straight into the destinations.
		return d.cmd(ctx, src, msg{Kind: cmdMove, Mask: mask, Off: [3]uint64{uint64(off), uint64(dstOff)}, N: uint64(n), Imm: imm})
	}
	// Relay: the source writes into the staging buffer, the dispatcher
	// waits for it (and for nothing else), then writes it on.
	stage := d.imm()
	arrived, err := d.r.Engine.ImmCounter(stage)
	if err != nil {
		return err
	}
	defer d.r.Engine.RemoveImmCount(stage)
	if err := d.cmd(ctx, src, msg{Kind: cmdMove, Mask: maskDispatcher, Off: [3]uint64{uint64(off), 0}, N: uint64(n), Imm: stage}); err != nil {
		return err
	}
	if err := arrived.Wait(ctx, 1); err != nil {
		return fmt.Errorf("relay: waiting for %d bytes from worker %d: %w", n, src, err)
	}
	var targets []fabric.ScatterTarget
	for w := range d.t.workers {
		if mask&(1<<w) != 0 {
			targets = append(targets, fabric.ScatterTarget{Dst: d.t.arenas[w], Length: uint64(n), DstOffset: uint64(dstOff)})
		}
	}
	done := fabric.NewTransfer()
	err = d.r.Engine.SubmitScatter(fabric.ScatterWrite{Src: d.staging.Region, Targets: targets, Imm: fabric.Immediate(imm)}, fabric.Notify(done))
	if err != nil {
		return err
	}
	d.stats.DataBytes += int64(n) * int64(1+len(targets))
	// The staging buffer is reused by the next move.
	return done.Wait(ctx)
}
