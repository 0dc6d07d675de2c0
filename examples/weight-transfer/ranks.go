package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/job"
)

// updateImm is the immediate every write of update v carries. A value per
// update keeps a late arrival from being counted in the next one.
func updateImm(v int) uint32 { return 0x57000000 | uint32(v)&0xFFFFF }

// card is what inference ranks publish: their weight buffer.
type card struct {
	Weights *fabric.Descriptor `json:"weights,omitempty"`
}

// transfer is one rank's life: lay out its shards, learn the inference
// ranks' buffers, plan, then run the updates.
func transfer(ctx context.Context, r *job.Rank, c config) error {
	ts := c.Shape.tensors()
	trainer := r.ID < c.Trainers
	k := r.ID // trainer index, or inference index below
	var lay layout
	if trainer {
		lay = trainerLayout(ts, k, c.Trainers)
	} else {
		k -= c.Trainers
		lay = inferLayout(ts, k, c.Inference)
	}
	access := fabric.AccessLocal
	if !trainer {
		access = fabric.AccessRemoteWrite // trainers write into it
	}
	buf, err := r.Alloc(max(lay.Size, 64), access)
	if err != nil {
		return err
	}
	mine := card{}
	if !trainer {
		mine.Weights = &buf.Desc
	}
	cards, err := job.Gather(ctx, r, mine)
	if err != nil {
		return fmt.Errorf("exchange descriptors: %w", err)
	}
	var dst []fabric.Descriptor
	for _, cd := range cards[c.Trainers:] {
		if cd.Weights == nil {
			return fmt.Errorf("an inference rank published no buffer: %w", fabric.ErrBadEncoding)
		}
		dst = append(dst, *cd.Weights)
	}
	s := plan(ts, c.Trainers, dst)
	if r.ID == 0 {
		describe(r, c, ts, s)
	}

	var times []time.Duration
	for v := range c.Warmup + c.Updates {
		var d time.Duration
		if trainer {
			d, err = push(ctx, r, ts, s, buf, k, c, v)
		} else {
			d, err = receive(ctx, r, ts, s, buf, lay, k, c, v)
		}
		if err != nil {
			return fmt.Errorf("update %d: %w", v, err)
		}
		if v >= c.Warmup {
			times = append(times, d)
		}
	}
	return report(ctx, r, c, s, times)
}

// push is a trainer's update: refresh its shards (the optimizer step,
// untimed), meet everyone at the start line, then post the schedule's
// writes and wait until they have left its memory.
func push(ctx context.Context, r *job.Rank, ts []tensor, s schedule, buf *job.Buffer, k int, c config, v int) (time.Duration, error) {
	lay := trainerLayout(ts, k, c.Trainers)
	for x, t := range ts {
		r0, r1 := trainerRows(t, k, c.Trainers)
		fillRows(buf.Bytes()[lay.Offset[x]:], t, x, r0, r1, v)
	}
	if err := r.Barrier(ctx); err != nil {
		return 0, err
	}
	start := time.Now()
	var sent fabric.TransferCounter
	n := int64(0)
	if len(s.Scatter[k]) > 0 {
		// One request for every contiguous piece of every tensor, to every
		// inference rank: the engine posts it in batches, one immediate per
		// target.
		err := r.Engine.SubmitScatter(fabric.ScatterWrite{Src: buf.Region, Targets: s.Scatter[k], Imm: fabric.Immediate(updateImm(v))},
			fabric.Count(&sent))
		if err != nil {
			return 0, err
		}
		n++
	}
	for _, p := range s.Paged[k] {
		p.Src, p.Imm = buf.Region, fabric.Immediate(updateImm(v))
		if err := r.Engine.SubmitPaged(p, fabric.Count(&sent)); err != nil {
			return 0, err
		}
		n++
	}
	// Completion here means the source may be reused, not that the bytes
	// are visible at the inference ranks: they learn that by counting.
	if err := sent.Wait(ctx, n); err != nil {
		return 0, err
	}
	if err := sent.Err(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// receive is an inference rank's update: count the schedule's immediates
// from the start line, then check every weight it holds.
func receive(ctx context.Context, r *job.Rank, ts []tensor, s schedule, buf *job.Buffer, lay layout, k int, c config, v int) (time.Duration, error) {
	// Register the counter before the start line: immediates that arrive
	// first are kept for it anyway, but this keeps the timing honest.
	arrived, err := r.Engine.ImmCounter(updateImm(v))
	if err != nil {
		return 0, err
	}
	defer r.Engine.RemoveImmCount(updateImm(v))
	if err := r.Barrier(ctx); err != nil {
		return 0, err
	}
	start := time.Now()
	if err := arrived.Wait(ctx, int64(s.Expect[k])); err != nil {
		return 0, fmt.Errorf("%d immediates expected, %d short: %w", s.Expect[k], -arrived.Count(), err)
	}
	d := time.Since(start)
	for x, t := range ts {
		r0, r1, c0, c1 := inferBlock(t, k, c.Inference)
		if row, col, ok := checkBlock(buf.Bytes()[lay.Offset[x]:], x, r0, r1, c0, c1, v); !ok {
			return 0, job.Mismatch("tensor %s (split by %s) element [%d, %d] is wrong after update %d", t.Name, t.Split, row, col, v)
		}
	}
	return d, nil
}
