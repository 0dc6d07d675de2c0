package main

import (
	"context"
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/fabric"
)

// tensorParallel is one rank of the -tp variant: every rank runs every
// layer on its shard, and each of a layer's two blocks ends with an
// all-reduce of the [rows, hidden] partial results.
//
// The all-reduce is the direct one, right for small activations: each
// rank writes its partial into its own slot of every other rank's reduce
// area with one scatter (one immediate per peer), counts the N-1 partials
// that land in its area and sums. Two areas, used alternately, are enough:
// a rank cannot start all-reduce k+2 before every rank has sent its part
// of k+1, which each does only after finishing k.
type tensorParallel struct {
	*stage
	counters [2]*fabric.ImmCounter
	targets  [2][]fabric.ScatterTarget
	step     int
	part     []uint16
	done     *fabric.Transfer
}

func newTensorParallel(s *stage) (*tensorParallel, error) {
	t := &tensorParallel{stage: s, done: fabric.NewTransfer(), part: make([]uint16, s.c.Chunk*s.c.Hidden)}
	for p := range t.counters {
		c, err := s.r.Engine.ImmCounter(immOf(kindReduce, 0, p))
		if err != nil {
			return nil, err
		}
		t.counters[p] = c
	}
	return t, nil
}

// slot is where rank src's partial of parity p lands in an inbox region.
func (t *tensorParallel) slot(p, src int) int {
	return t.lay.reduce + (p*t.c.Ranks+src)*t.lay.ring.slotBytes
}

// allReduce replaces x with the sum over ranks of x.
func (t *tensorParallel) allReduce(ctx context.Context, x []uint16) error {
	p, me, n := t.step%2, t.r.ID, len(x)*2
	t.step++
	// The partial leaves from a registered work slot (after the ring
	// slots), one per parity.
	srcOff := (t.c.Slots + p) * t.lay.ring.slotBytes
	copy(acts(t.work.Bytes()[srcOff:srcOff+n]), x)
	// The targets are built once per parity and size: the engine reads
	// them in place, so they must not change while a scatter is in flight.
	if len(t.targets[p]) == 0 || t.targets[p][0].Length != uint64(n) {
		t.targets[p] = t.targets[p][:0]
		for j, d := range t.descs {
			if j != me {
				t.targets[p] = append(t.targets[p], fabric.ScatterTarget{Dst: d, Length: uint64(n),
					SrcOffset: uint64(srcOff), DstOffset: uint64(t.slot(p, me))})
			}
		}
	}
	err := t.r.Engine.SubmitScatter(fabric.ScatterWrite{Src: t.work.Region, Targets: t.targets[p],
		Imm: fabric.Immediate(immOf(kindReduce, 0, p))}, fabric.Notify(t.done))
	if err != nil {
		return err
	}
	if err := t.counters[p].Wait(ctx, int64(t.c.Ranks-1)); err != nil {
		return fmt.Errorf("all-reduce %d: %w", t.step-1, err)
	}
	for j := range t.c.Ranks {
		if j != me {
			off := t.slot(p, j)
			for i, v := range acts(t.inbox.Bytes()[off : off+n]) {
				x[i] += v
			}
		}
	}
	// The next all-reduce of this parity rewrites the source.
	return t.done.Wait(ctx)
}

// layers runs every layer on this rank's shard, with two all-reduces per
// layer, padding each layer to perLayer/N of simulated compute.
func (t *tensorParallel) layers(ctx context.Context, x []uint16, perLayer time.Duration) (time.Duration, error) {
	var compute time.Duration
	part := t.part[:len(x)]
	for l := range t.c.Layers {
		for b := range 2 {
			start := time.Now()
			t.m.partial(l, b, t.r.ID, x, part)
			time.Sleep(time.Until(start.Add(perLayer / time.Duration(2*t.c.Ranks))))
			compute += time.Since(start)
			if err := t.allReduce(ctx, part); err != nil {
				return 0, err
			}
			for i, v := range part {
				x[i] += v
			}
		}
	}
	return compute, nil
}

// prefill runs the prompt chunk by chunk; every rank ends with the same
// output and samples the same first token.
func (t *tensorParallel) prefill(ctx context.Context) (prefillResult, error) {
	c, h := t.c, t.c.Hidden
	prompt := t.m.prompt(c.Prompt)
	x := make([]uint16, c.Chunk*h)
	var res prefillResult
	start := time.Now()
	for c0 := 0; c0 < c.Prompt; c0 += c.Chunk {
		rows := min(c.Chunk, c.Prompt-c0)
		res.HopBytes = max(res.HopBytes, rows*h*2)
		for r := range rows {
			t.m.embed(prompt[c0+r], c0+r, x[r*h:(r+1)*h])
		}
		d, err := t.layers(ctx, x[:rows*h], c.PrefillLayerTime)
		if err != nil {
			return res, err
		}
		res.Compute += d
		res.Checksum = checksum(res.Checksum, x[:rows*h])
		if c0+rows == c.Prompt {
			t.tokens = append(t.tokens, t.m.sample(x[(rows-1)*h:rows*h]))
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// decode generates steps tokens; every rank samples every token.
func (t *tensorParallel) decode(ctx context.Context, steps int) (decodeResult, error) {
	res := decodeResult{Mode: "tp"}
	x := make([]uint16, t.c.Hidden)
	prev := t.tokens[0]
	for k := 1; k <= steps; k++ {
		start := time.Now()
		t.m.embed(prev, t.c.Prompt+k-1, x)
		if _, err := t.layers(ctx, x, t.c.DecodeLayerTime); err != nil {
			return res, fmt.Errorf("step %d: %w", k, err)
		}
		prev = t.m.sample(x)
		res.Tokens = append(res.Tokens, prev)
		res.Times = append(res.Times, time.Since(start))
	}
	return res, nil
}
