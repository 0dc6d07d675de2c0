package main

import (
	"context"
	"fmt"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/job"
)

// card is what every rank publishes: its inbox region.
type card struct {
	Inbox fabric.Descriptor `json:"inbox"`
}

func newStage(ctx context.Context, r *job.Rank, c config) (*stage, error) {
	s := &stage{c: c, m: c.model(), r: r, lay: newLayout(c), nics: r.Engine.NICs()}
	act := s.lay.ring.slotBytes
	var err error
	if s.inbox, err = r.Alloc(s.lay.size, fabric.AccessRemoteWrite); err != nil {
		return nil, err
	}
	// Send sources: one work slot per ring slot, then the two all-reduce
	// partials (and the probe's burst, which reuses the start).
	if s.work, err = r.Alloc(max((c.Slots+2)*act, c.ProbeBytes), fabric.AccessLocal); err != nil {
		return nil, err
	}
	cards, err := job.Gather(ctx, r, card{Inbox: s.inbox.Desc})
	if err != nil {
		return nil, fmt.Errorf("exchange descriptors: %w", err)
	}
	for _, cd := range cards {
		s.descs = append(s.descs, cd.Inbox)
	}
	for range c.Slots {
		s.sent = append(s.sent, fabric.NewTransfer())
	}
	s.busy = make([]bool, c.Slots)
	s.scr = make([]uint16, 2*c.Chunk*c.Hidden)
	return s, nil
}

// outcome is what each rank reports to rank 0.
type outcome struct {
	Prefill prefillResult  `json:"prefill"`
	First   []int          `json:"first,omitempty"` // the prefill's token, where this rank saw it
	Decode  []decodeResult `json:"decode"`
	Probe   []probeResult  `json:"probe,omitempty"`
}

func runRank(ctx context.Context, r *job.Rank, c config) error {
	s, err := newStage(ctx, r, c)
	if err != nil {
		return err
	}
	if err := s.warm(ctx); err != nil {
		return err
	}
	var out outcome
	if c.Probe {
		if out.Probe, err = s.probe(ctx); err != nil {
			return err
		}
		return reportProbe(ctx, r, c, out.Probe)
	}
	// Every phase starts together, so rank 0's clock measures the phase.
	if err := r.Barrier(ctx); err != nil {
		return err
	}
	if c.TP {
		t, err := newTensorParallel(s)
		if err != nil {
			return err
		}
		if out.Prefill, err = t.prefill(ctx); err != nil {
			return fmt.Errorf("prefill: %w", err)
		}
		if err := r.Barrier(ctx); err != nil {
			return err
		}
		d, err := t.decode(ctx, c.Tokens)
		if err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		out.Decode = append(out.Decode, d)
	} else {
		p, err := newPipeline(s)
		if err != nil {
			return err
		}
		if out.Prefill, err = p.prefill(ctx); err != nil {
			return fmt.Errorf("prefill: %w", err)
		}
		for _, mode := range c.Modes {
			if err := r.Barrier(ctx); err != nil {
				return err
			}
			d, err := p.decode(ctx, mode, c.Tokens)
			if err != nil {
				return fmt.Errorf("decode %s: %w", mode, err)
			}
			out.Decode = append(out.Decode, d)
		}
		if err := p.drain(ctx); err != nil {
			return err
		}
	}
	out.First = s.tokens
	return report(ctx, r, c, out)
}
