package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/job"
)

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
			d, err = receive(ctx, r, ts, s, buf, lay, k, c, v, writers(s, k))
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

// writers returns the trainers that write to inference rank i.
func writers(s schedule, i int) []int {
	var ks []int
	for k := range s.Bytes {
		if s.Bytes[k][i] > 0 {
			ks = append(ks, k)
		}
	}
	return ks
}

// startLine is what ranks exchange at the start of an update: an
// inference rank's mailboxes for it, by trainer index (zero for a trainer
// that writes nothing there); trainers send none.
type startLine struct {
	Mailboxes []fabric.Mailbox `json:"mailboxes,omitempty"`
}

// notePayload says who notifies whom of which update.
func notePayload(trainer, v int) []byte { return fmt.Appendf(nil, "trainer %d update %d", trainer, v) }

// push is a trainer's update: refresh its shards (the optimizer step,
// untimed), meet everyone at the start line, post the schedule's writes,
// wait until they completed, then notify every inference rank it wrote to.
func push(ctx context.Context, r *job.Rank, ts []tensor, s schedule, buf *job.Buffer, k int, c config, v int) (time.Duration, error) {
	lay := trainerLayout(ts, k, c.Trainers)
	for x, t := range ts {
		r0, r1 := trainerRows(t, k, c.Trainers)
		fillRows(buf.Bytes()[lay.Offset[x]:], t, x, r0, r1, v)
	}
	lines, err := job.Gather(ctx, r, startLine{})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	var sent fabric.TransferCounter
	n := int64(0)
	if len(s.Scatter[k]) > 0 {
		// One request for every contiguous piece of every tensor, to every
		// inference rank: the engine posts it in batches.
		if err := r.Engine.SubmitScatter(fabric.ScatterWrite{Src: buf.Region, Targets: s.Scatter[k]}, fabric.Count(&sent)); err != nil {
			return 0, err
		}
		n++
	}
	for _, p := range s.Paged[k] {
		p.Src = buf.Region
		if err := r.Engine.SubmitPaged(p, fabric.Count(&sent)); err != nil {
			return 0, err
		}
		n++
	}
	// Completion here means the source may be reused; the inference ranks
	// learn that the bytes are there from the notifications, which the
	// engine delivers after every write that completed before them.
	if err := sent.Wait(ctx, n); err != nil {
		return 0, err
	}
	if err := sent.Err(); err != nil {
		return 0, err
	}
	var notes fabric.TransferCounter
	m := int64(0)
	for i := range s.Bytes[k] {
		if s.Bytes[k][i] == 0 {
			continue
		}
		to := lines[c.Trainers+i].Mailboxes[k]
		if err := r.Engine.SubmitNotification(fabric.Notification{To: to, Payload: notePayload(k, v)}, fabric.Count(&notes)); err != nil {
			return 0, err
		}
		m++
	}
	if err := notes.Wait(ctx, m); err != nil {
		return 0, err
	}
	if err := notes.Err(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// receive is an inference rank's update: lease a mailbox per trainer that
// writes to it, publish them at the start line, wait for every one of
// those trainers' notifications, then check every weight it holds. The
// leases are retired at the end, so a late notification of this update is
// dropped, never taken for the next one.
func receive(ctx context.Context, r *job.Rank, ts []tensor, s schedule, buf *job.Buffer, lay layout, k int, c config, v int, from []int) (time.Duration, error) {
	leases := make([]*fabric.Lease, c.Trainers)
	mine := startLine{Mailboxes: make([]fabric.Mailbox, c.Trainers)}
	defer func() {
		for _, l := range leases {
			_ = l.Retire()
		}
	}()
	for _, t := range from {
		l, err := r.Engine.LeaseImms(1)
		if err != nil {
			return 0, err
		}
		leases[t] = l
		if mine.Mailboxes[t], err = l.Mailbox(); err != nil {
			return 0, err
		}
	}
	if _, err := job.Gather(ctx, r, mine); err != nil {
		return 0, err
	}
	start := time.Now()
	for _, t := range from {
		n, err := leases[t].WaitNotification(ctx)
		if err != nil {
			return 0, fmt.Errorf("trainer %d's notification: %w", t, err)
		}
		if want := notePayload(t, v); string(n.Payload) != string(want) {
			return 0, fmt.Errorf("trainer %d's mailbox got %q, want %q", t, n.Payload, want)
		}
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
