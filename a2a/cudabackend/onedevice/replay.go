package onedevice

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/reference"
	"github.com/ferryrdma/ferry/a2a/workload"
)

// Replayer runs one recorded step of every rank again: a CUDA graph
// captured once and launched per replay (Graph), or the launches queued
// again (Requeue).
type Replayer interface {
	// Record takes the launches of every rank (Load with boundM) once.
	Record(ctx context.Context, w *World, steps [][4]cudabackend.Launch) error
	// Replay runs them once more, waits, and checks every launch's status.
	Replay(ctx context.Context, w *World) error
	Close() error
}

// Requeue replays by queueing the recorded launches again, in lock step.
type Requeue struct{ steps [][4]cudabackend.Launch }

func (q *Requeue) Record(ctx context.Context, w *World, steps [][4]cudabackend.Launch) error {
	q.steps = steps
	return nil
}

func (q *Requeue) Replay(ctx context.Context, w *World) error {
	_, _, err := w.Run(ctx, LockStep, q.steps)
	return err
}

func (q *Requeue) Close() error { return nil }

// ReplayOptions say how Replay runs.
type ReplayOptions struct {
	Seed    uint64
	Replays int
	// Accumulate is what every replay's combine does (launch arguments do
	// not change between replays).
	Accumulate bool
	// Recorded says rp already holds launches recorded over this world's
	// buffers with boundM and Accumulate: Replay replays them instead of
	// recording on its first replay.
	Recorded bool
}

// Replay records one set of launches per rank over the world's buffers,
// with the token count in device memory, then runs it o.Replays times:
// before each the host only writes new data into the buffers (tokens,
// routing, expert outputs, a new token count), never a launch argument;
// after each every rank is checked against the oracle.
func (w *World) Replay(ctx context.Context, rp Replayer, o ReplayOptions) error {
	l := &w.L
	rng := rand.New(rand.NewPCG(o.Seed, 6))
	// Full-size inputs: every group has MaxTokens tokens; each replay uses
	// a prefix of them, SetTokens tokens.
	full := make([]reference.GroupInput, l.Groups)
	for h := range full {
		for full[h].Tokens < l.MaxTokens {
			full[h] = workload.RandomGroups(rng, l, rng.IntN(2) == 0)[h]
		}
	}
	for k := 0; k < o.Replays; k++ {
		m := rng.IntN(l.MaxTokens + 1)
		if k == 0 {
			m = l.MaxTokens
		}
		it, err := truncated(w.Cfg, l, full, m, o.Accumulate, rng)
		if err != nil {
			return err
		}
		steps, err := w.Load(it, true)
		if err != nil {
			return err
		}
		if err := w.SetTokens(m); err != nil {
			return err
		}
		if k == 0 && !o.Recorded {
			if err := rp.Record(ctx, w, steps); err != nil {
				return err
			}
		}
		if err := rp.Replay(ctx, w); err != nil {
			return fmt.Errorf("replay %d (%d tokens): %w", k, m, err)
		}
		if err := w.Check(it); err != nil {
			return fmt.Errorf("replay %d (%d tokens): %w", k, m, err)
		}
	}
	return nil
}

// truncated is the iteration whose groups are the first m tokens of full,
// with new expert outputs.
func truncated(cfg a2a.Config, l *a2a.Layout, full []reference.GroupInput, m int, accumulate bool, rng *rand.Rand) (*workload.Iteration, error) {
	it := &workload.Iteration{Groups: make([]reference.GroupInput, len(full)), Accumulate: accumulate}
	K := l.ExpertsPerToken
	for h, g := range full {
		it.Groups[h] = reference.GroupInput{Tokens: m, X: g.X[:m*l.TokenBytes], Scales: g.Scales[:m*l.Scales],
			Indices: g.Indices[:m*K], Weights: g.Weights[:m*K]}
	}
	var err error
	if it.Want, err = reference.Dispatch(cfg, it.Groups); err != nil {
		return nil, err
	}
	it.Ys = workload.ExpertOutputs(l, it.Want)
	it.Prev = make([][]byte, len(full))
	for h := range it.Prev {
		it.Prev[h] = make([]byte, m*l.CombineBytes)
		for i := 0; i < m*l.Hidden; i++ {
			a2a.EncodeFloat32(l.CombineType, it.Prev[h], i, float32(math.Round(float64(rng.Float32()*8)))/8)
		}
	}
	it.WantOut, err = reference.Combine(cfg, it.Groups, it.Want, it.Ys, it.Prev, accumulate)
	return it, err
}
