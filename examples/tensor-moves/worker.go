package main

import (
	"context"
	"fmt"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/job"
)

// workerLoop runs the commands the dispatcher sends, in order, until the
// phase ends. Moves only post writes (they never block), and every wait is
// for data whose move the dispatcher issued earlier, so running the queue
// in order cannot deadlock.
func workerLoop(ctx context.Context, r *job.Rank, mb *mailbox, snd *sender, t *topology, arena *job.Buffer) error {
	var moves fabric.TransferCounter
	posted := int64(0)
	mem := arena.Bytes()
	// at returns n elements at off, or an error if the dispatcher named
	// memory outside the arena.
	at := func(off uint64, n uint64) ([]uint32, error) {
		if off > uint64(len(mem)) || 4*n > uint64(len(mem))-off {
			return nil, fmt.Errorf("command names [%d, +%d) outside an arena of %d bytes: %w", off, 4*n, len(mem), fabric.ErrOutOfBounds)
		}
		return words(mem[off : off+4*n]), nil
	}
	// wait counts the immediates of a step's data before computing on it.
	wait := func(m msg) error {
		if m.Count == 0 {
			return nil
		}
		c, err := r.Engine.ImmCounter(m.Imm)
		if err != nil {
			return err
		}
		defer r.Engine.RemoveImmCount(m.Imm)
		return c.Wait(ctx, int64(m.Count))
	}
	ack := func(m msg, sum uint64) error {
		return snd.send(ctx, 0, msg{Kind: ackDone, Op: m.Op, Sum: sum})
	}
	for {
		m, err := mb.next(ctx)
		if err != nil {
			return err
		}
		if err := moves.Err(); err != nil {
			return fmt.Errorf("a move failed: %w", err)
		}
		switch m.Kind {
		case cmdFill:
			var x []uint32
			if x, err = at(m.Off[0], m.N); err == nil {
				fill(x, m.Seed, int(m.Off[1]))
				err = ack(m, checksum(x, int(m.Off[1])))
			}
		case cmdMove:
			// One scatter to every destination: one immediate each.
			var targets []fabric.ScatterTarget
			for w := range t.workers {
				if m.Mask&(1<<w) != 0 {
					targets = append(targets, fabric.ScatterTarget{Dst: t.arenas[w], Length: m.N, SrcOffset: m.Off[0], DstOffset: m.Off[1]})
				}
			}
			if m.Mask&maskDispatcher != 0 {
				targets = append(targets, fabric.ScatterTarget{Dst: t.staging, Length: m.N, SrcOffset: m.Off[0], DstOffset: m.Off[1]})
			}
			err = r.Engine.SubmitScatter(fabric.ScatterWrite{Src: arena.Region, Targets: targets, Imm: fabric.Immediate(m.Imm)}, fabric.Count(&moves))
			posted++
		case cmdAdd:
			err = workerAdd(m, at, wait, ack)
		case cmdMatmul:
			var a, out []uint32
			if a, err = at(m.Off[0], m.N); err == nil {
				if out, err = at(m.Off[1], m.N); err == nil {
					matmul(out, a, m.Seed)
				}
			}
		case cmdReduce:
			err = workerReduce(m, at, wait, ack)
		case cmdChecksum:
			var x []uint32
			if err = wait(m); err == nil {
				if x, err = at(m.Off[0], m.N); err == nil {
					err = ack(m, checksum(x, 0))
				}
			}
		case cmdPhaseEnd:
			// Every move has landed (the dispatcher saw every ack); wait for
			// their local completions too before the next phase reuses
			// memory.
			if err := moves.Wait(ctx, posted); err != nil {
				return err
			}
			return moves.Err()
		default:
			err = fmt.Errorf("unknown command %d", m.Kind)
		}
		if err != nil {
			return fmt.Errorf("command %d of op %d: %w", m.Kind, m.Op, err)
		}
	}
}

type atFunc func(off, n uint64) ([]uint32, error)

func workerAdd(m msg, at atFunc, wait func(msg) error, ack func(msg, uint64) error) error {
	if err := wait(m); err != nil {
		return err
	}
	var x [3][]uint32
	for i := range x {
		var err error
		if x[i], err = at(m.Off[i], m.N); err != nil {
			return err
		}
	}
	add(x[2], x[0], x[1])
	return ack(m, checksum(x[2], 0))
}

// workerReduce sums its own shard and the Count shards that arrived.
func workerReduce(m msg, at atFunc, wait func(msg) error, ack func(msg, uint64) error) error {
	if err := wait(m); err != nil {
		return err
	}
	own, err := at(m.Off[0], m.N)
	if err != nil {
		return err
	}
	out, err := at(m.Off[2], m.N)
	if err != nil {
		return err
	}
	copy(out, own)
	for j := range uint64(m.Count) {
		in, err := at(m.Off[1]+4*m.N*j, m.N)
		if err != nil {
			return err
		}
		add(out, out, in)
	}
	return ack(m, checksum(out, 0))
}
