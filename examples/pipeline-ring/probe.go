package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/job"
)

// The link probe: for every ordered pair of ranks, the latency of a
// zero-byte write's round trip and the bandwidth of a burst of large
// writes, measured by the writer while every other rank waits. The matrix
// is what placing shards on heterogeneous machines needs instead of
// placeholder bandwidths.

var (
	immPing  = immOf(kindProbe, 0, 1)
	immPong  = immOf(kindProbe, 0, 2)
	immBurst = immOf(kindProbe, 0, 3)
	immAck   = immOf(kindProbe, 0, 4)
	immWarm  = immOf(kindProbe, 0, 5)
)

// warm has every rank write a zero-byte immediate to every other rank
// before anything is timed: on tcp the first write to a new peer waits for
// the connection, tens of milliseconds.
func (s *stage) warm(ctx context.Context) error {
	e, n := s.r.Engine, s.c.Ranks
	arrived, err := e.ImmCounter(immWarm)
	if err != nil {
		return err
	}
	defer e.RemoveImmCount(immWarm)
	var sent fabric.TransferCounter
	for j, d := range s.descs {
		if j != s.r.ID {
			if err := e.SubmitImm(fabric.ImmWrite{Imm: immWarm, Dst: d}, fabric.Count(&sent)); err != nil {
				return err
			}
		}
	}
	if err := arrived.Wait(ctx, int64(n-1)); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return settle(ctx, &sent, int64(n-1))
}

// probeResult is one measured pair.
type probeResult struct {
	From, To  int     `json:"-"`
	LatencyUs float64 `json:"latency_us"` // half the median round trip
	GBps      float64 `json:"gbps"`
}

// probe measures every pair and returns the pairs this rank wrote from.
func (s *stage) probe(ctx context.Context) ([]probeResult, error) {
	e, me := s.r.Engine, s.r.ID
	counters := map[uint32]*fabric.ImmCounter{}
	for _, v := range []uint32{immPing, immPong, immBurst, immAck} {
		c, err := e.ImmCounter(v)
		if err != nil {
			return nil, err
		}
		counters[v] = c
		defer e.RemoveImmCount(v)
	}
	// The burst's source is the work buffer: fill it with a pattern the
	// target checks after the burst.
	n := min(s.c.ProbeBytes, len(s.work.Bytes()))
	var out []probeResult
	for from := range s.c.Ranks {
		for to := range s.c.Ranks {
			if from == to {
				continue
			}
			if err := s.r.Barrier(ctx); err != nil {
				return nil, err
			}
			var err error
			switch me {
			case from:
				pattern(s.work.Bytes()[:n], from, to)
				var res probeResult
				res, err = s.probeFrom(ctx, counters, s.descs[to], n)
				res.From, res.To = from, to
				out = append(out, res)
			case to:
				err = s.probeTo(ctx, counters, s.descs[from], n, from)
			}
			if err != nil {
				return nil, fmt.Errorf("probe %d->%d: %w", from, to, err)
			}
		}
	}
	return out, nil
}

func (s *stage) probeFrom(ctx context.Context, ctr map[uint32]*fabric.ImmCounter, dst fabric.Descriptor, n int) (probeResult, error) {
	e := s.r.Engine
	var res probeResult
	var sent fabric.TransferCounter
	posted := int64(0)
	rtts := make([]time.Duration, 0, s.c.ProbeIters)
	for i := range s.c.ProbeIters + s.c.ProbeIters/10 + 1 {
		start := time.Now()
		if err := e.SubmitImm(fabric.ImmWrite{Imm: immPing, Dst: dst}, fabric.Count(&sent)); err != nil {
			return res, err
		}
		posted++
		if err := ctr[immPong].Wait(ctx, 1); err != nil {
			return res, err
		}
		if i > s.c.ProbeIters/10 { // the first round trips set up the connection
			rtts = append(rtts, time.Since(start))
		}
	}
	slices.Sort(rtts)
	res.LatencyUs = float64(rtts[len(rtts)/2]) / 2e3
	start := time.Now()
	for range probeBurst {
		err := e.SubmitSingle(fabric.SingleWrite{Src: s.work.Region, Length: uint64(n), Dst: dst, DstOffset: uint64(s.lay.probe),
			Imm: fabric.Immediate(immBurst)}, fabric.Count(&sent))
		if err != nil {
			return res, err
		}
		posted++
	}
	if err := ctr[immAck].Wait(ctx, 1); err != nil {
		return res, err
	}
	res.GBps = float64(probeBurst*n) / time.Since(start).Seconds() / 1e9
	return res, settle(ctx, &sent, posted)
}

// settle waits for n transfers counted by c and returns the first error.
func settle(ctx context.Context, c *fabric.TransferCounter, n int64) error {
	if err := c.Wait(ctx, n); err != nil {
		return err
	}
	return c.Err()
}

// probeBurst is how many large writes one bandwidth sample posts at once.
const probeBurst = 8

func (s *stage) probeTo(ctx context.Context, ctr map[uint32]*fabric.ImmCounter, back fabric.Descriptor, n, from int) error {
	e := s.r.Engine
	var sent fabric.TransferCounter
	posted := int64(0)
	for range s.c.ProbeIters + s.c.ProbeIters/10 + 1 {
		if err := ctr[immPing].Wait(ctx, 1); err != nil {
			return err
		}
		if err := e.SubmitImm(fabric.ImmWrite{Imm: immPong, Dst: back}, fabric.Count(&sent)); err != nil {
			return err
		}
		posted++
	}
	// Every write of the burst is sharded over the NICs of both ends (the
	// writer's are those back lists).
	per := fabric.ExpectedImms(fabric.SingleShape(fabric.Sharded(0)), len(back.NICs), s.nics)
	if err := ctr[immBurst].Wait(ctx, int64(probeBurst*per)); err != nil {
		return err
	}
	got := s.inbox.Bytes()[s.lay.probe : s.lay.probe+n]
	want := make([]byte, n)
	pattern(want, from, s.r.ID)
	for i := range got {
		if got[i] != want[i] {
			return job.Mismatch("probe burst from rank %d: byte %d is %#x, want %#x", from, i, got[i], want[i])
		}
	}
	if err := e.SubmitImm(fabric.ImmWrite{Imm: immAck, Dst: back}, fabric.Count(&sent)); err != nil {
		return err
	}
	return settle(ctx, &sent, posted+1)
}

// pattern fills b with bytes that depend on the pair and the position.
func pattern(b []byte, from, to int) {
	for i := range b {
		b[i] = byte(i*131 + from*7 + to*13 + i>>9)
	}
}
