package a2atest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/reference"
)

func divisors(n int) []int {
	var d []int
	for i := 1; i <= n; i++ {
		if n%i == 0 {
			d = append(d, i)
		}
	}
	return d
}

func pick[T any](rng *rand.Rand, v []T) T { return v[rng.IntN(len(v))] }

// RandomConfig draws a world of at most maxW ranks covering the space the
// planner must handle: any S dividing W, any D dividing S, E often not a
// multiple of W, every private window kind, padding 1, 16 or 128.
func RandomConfig(rng *rand.Rand, maxW int) a2a.Config {
	W := 1 + rng.IntN(maxW)
	S := pick(rng, divisors(W))
	D := pick(rng, divisors(S))
	K := 1 + rng.IntN(6)
	E := max(K, 1+rng.IntN(3*W+6))
	if rng.IntN(3) == 0 && E%W == 0 {
		E++
	}
	H := 1 + rng.IntN(24)
	return a2a.Config{
		WorldSize: W, NVLinkSize: S, ReplicaSize: D, NICsPerGPU: 1 + rng.IntN(3),
		MaxTokens: 1 + rng.IntN(20), Hidden: H, Scales: rng.IntN(min(H, 5) + 1),
		DispatchType:    pick(rng, []a2a.DType{a2a.FP8, a2a.BF16, a2a.FP16, a2a.FP32}),
		CombineType:     pick(rng, []a2a.DType{a2a.BF16, a2a.FP16, a2a.FP32}),
		Experts:         E,
		ExpertsPerToken: K,
		ExpertPadding:   pick(rng, []int{1, 16, 128}),
		PrivateTokens:   pick(rng, []int{a2a.NoPrivateWindow, 1, 8, 0}),
	}
}

// RandomGroups draws each group's tokens, 0..T of them (T one time in
// five); with skew every token's first slot goes to one expert.
func RandomGroups(rng *rand.Rand, l *a2a.Layout, skew bool) []reference.Group {
	K, E := l.ExpertsPerToken, l.Experts
	hot := rng.IntN(E)
	groups := make([]reference.Group, l.Groups)
	for h := range groups {
		m := rng.IntN(l.MaxTokens + 1)
		if rng.IntN(5) == 0 {
			m = l.MaxTokens
		}
		g := reference.Group{
			Tokens:  m,
			X:       make([]byte, m*l.TokenBytes),
			Scales:  make([]float32, m*l.Scales),
			Indices: make([]uint32, m*K),
			Weights: make([]float32, m*K),
		}
		for i := range g.X {
			g.X[i] = byte(rng.Uint32())
		}
		for i := range g.Scales {
			g.Scales[i] = rng.Float32()
		}
		for i := range g.Weights {
			g.Weights[i] = rng.Float32()
		}
		for t := 0; t < m; t++ {
			perm := rng.Perm(E)
			if skew {
				for i, e := range perm {
					if e == hot {
						perm[0], perm[i] = perm[i], perm[0]
					}
				}
			}
			for k := 0; k < K; k++ {
				g.Indices[t*K+k] = uint32(perm[k])
			}
		}
		groups[h] = g
	}
	return groups
}

// ExpertOutputs plays the experts: a deterministic function of each
// dispatched row, in the combine type.
func ExpertOutputs(l *a2a.Layout, d []reference.Dispatched) [][]byte {
	ys := make([][]byte, len(d))
	for r := range d {
		y := make([]byte, l.OutputRows*l.CombineBytes)
		for row := 0; row < l.OutputRows; row++ {
			x := d[r].X[row*l.TokenBytes : (row+1)*l.TokenBytes]
			for i := 0; i < l.Hidden; i++ {
				v := float32(int(x[i%len(x)])-128)/37 + float32(r)/8
				a2a.EncodeFloat32(l.CombineType, y[row*l.CombineBytes:], i, v)
			}
		}
		ys[r] = y
	}
	return ys
}

// World is W contexts over some backend, and what runs between iterations.
type World struct {
	Contexts []*a2a.Context
	// BeforeIteration, if set, runs before each iteration (poisoning
	// buffers, for instance).
	BeforeIteration func(it int)
	// Timeout bounds each iteration (default 30 s).
	Timeout time.Duration
}

// Run drives iters iterations of dispatch and combine on every rank at
// once, with fresh random inputs each time, and compares each rank's
// dispatch output (counts, offsets, rows, scales) and combine output with
// the oracle, bit for bit.
func Run(tb testing.TB, cfg a2a.Config, w *World, seed uint64, iters int) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	W := cfg.WorldSize
	l := w.Contexts[0].Layout()
	timeout := w.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	for it := 0; it < iters; it++ {
		in, err := newIteration(rng, cfg, l)
		if err != nil {
			tb.Fatal(err)
		}
		groups, want, ys, prev, wantOut, accumulate := in.groups, in.want, in.ys, in.prev, in.wantOut, in.accumulate
		if w.BeforeIteration != nil {
			w.BeforeIteration(it)
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		errs := make([]error, W)
		douts := make([]a2a.DispatchOutput, W)
		couts := make([]a2a.CombineOutput, W)
		var wg sync.WaitGroup
		for r, c := range w.Contexts {
			g := &groups[l.Group(r)]
			douts[r] = a2a.DispatchOutput{
				ExpertTokens:  make([]int32, l.LocalExperts),
				ExpertOffsets: make([]int32, l.LocalExperts+1),
				X:             make([]byte, l.OutputRows*l.TokenBytes),
				Scales:        make([]float32, l.OutputRows*l.Scales),
			}
			couts[r] = a2a.CombineOutput{
				Out:        append([]byte(nil), prev[l.Group(r)]...),
				Weights:    g.Weights,
				Accumulate: accumulate,
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				in := a2a.DispatchInput{Tokens: g.Tokens, X: g.X, Scales: g.Scales, Indices: g.Indices}
				if err := c.Dispatch(ctx, &in, &douts[r]); err != nil {
					errs[r] = fmt.Errorf("dispatch: %w", err)
					return
				}
				if err := c.Combine(ctx, &a2a.CombineInput{Y: ys[r]}, &couts[r]); err != nil {
					errs[r] = fmt.Errorf("combine: %w", err)
				}
			}()
		}
		wg.Wait()
		cancel()
		for r, err := range errs {
			if err != nil {
				tb.Fatalf("iteration %d rank %d: %v", it, r, err)
			}
		}
		for r := range w.Contexts {
			if err := compare(l, &want[r], &douts[r]); err != nil {
				tb.Fatalf("iteration %d rank %d: %v", it, r, err)
			}
			if string(couts[r].Out) != string(wantOut[l.Group(r)]) {
				tb.Fatalf("iteration %d rank %d: combine output differs from the oracle", it, r)
			}
		}
	}
}

// iteration is one iteration's inputs and the oracle's answers.
type iteration struct {
	groups     []reference.Group
	want       []reference.Dispatched
	ys         [][]byte
	prev       [][]byte
	wantOut    [][]byte
	accumulate bool
}

// newIteration draws an iteration from rng; every rank drawing from the
// same seed gets the same one.
func newIteration(rng *rand.Rand, cfg a2a.Config, l *a2a.Layout) (*iteration, error) {
	it := &iteration{groups: RandomGroups(rng, l, rng.IntN(4) == 0)}
	var err error
	if it.want, err = reference.Dispatch(cfg, it.groups); err != nil {
		return nil, err
	}
	it.ys = ExpertOutputs(l, it.want)
	it.accumulate = rng.IntN(2) == 0
	it.prev = make([][]byte, l.Groups)
	for h := range it.prev {
		it.prev[h] = make([]byte, it.groups[h].Tokens*l.CombineBytes)
		for i := 0; i < it.groups[h].Tokens*l.Hidden; i++ {
			a2a.EncodeFloat32(l.CombineType, it.prev[h], i, rng.Float32())
		}
	}
	it.wantOut, err = reference.Combine(cfg, it.groups, it.want, it.ys, it.prev, it.accumulate)
	return it, err
}

// RunRank is Run for one rank of a world whose ranks live in different
// processes: every rank draws the same inputs from seed, runs its own
// part, and checks its own results. It returns the first mismatch.
func RunRank(ctx context.Context, cfg a2a.Config, c *a2a.Context, rank int, seed uint64, iters int) error {
	rng := rand.New(rand.NewPCG(seed, 99))
	l := c.Layout()
	for it := 0; it < iters; it++ {
		in, err := newIteration(rng, cfg, l)
		if err != nil {
			return err
		}
		g := &in.groups[l.Group(rank)]
		dout := a2a.DispatchOutput{
			ExpertTokens:  make([]int32, l.LocalExperts),
			ExpertOffsets: make([]int32, l.LocalExperts+1),
			X:             make([]byte, l.OutputRows*l.TokenBytes),
			Scales:        make([]float32, l.OutputRows*l.Scales),
		}
		cout := a2a.CombineOutput{
			Out:        append([]byte(nil), in.prev[l.Group(rank)]...),
			Weights:    g.Weights,
			Accumulate: in.accumulate,
		}
		din := a2a.DispatchInput{Tokens: g.Tokens, X: g.X, Scales: g.Scales, Indices: g.Indices}
		if err := c.Dispatch(ctx, &din, &dout); err != nil {
			return fmt.Errorf("iteration %d dispatch: %w", it, err)
		}
		if err := compare(l, &in.want[rank], &dout); err != nil {
			return fmt.Errorf("iteration %d: %w", it, err)
		}
		if err := c.Combine(ctx, &a2a.CombineInput{Y: in.ys[rank]}, &cout); err != nil {
			return fmt.Errorf("iteration %d combine: %w", it, err)
		}
		if string(cout.Out) != string(in.wantOut[l.Group(rank)]) {
			return fmt.Errorf("iteration %d: combine output differs from the oracle", it)
		}
	}
	return nil
}

func compare(l *a2a.Layout, w *reference.Dispatched, d *a2a.DispatchOutput) error {
	for i := 0; i < l.LocalExperts; i++ {
		if d.ExpertTokens[i] != w.ExpertTokens[i] || d.ExpertOffsets[i] != w.ExpertOffset[i] {
			return fmt.Errorf("expert %d: %d tokens at %d, want %d at %d", i,
				d.ExpertTokens[i], d.ExpertOffsets[i], w.ExpertTokens[i], w.ExpertOffset[i])
		}
	}
	for row, o := range w.Origin {
		if o.Group < 0 {
			continue
		}
		got := d.X[row*l.TokenBytes : (row+1)*l.TokenBytes]
		exp := w.X[row*l.TokenBytes : (row+1)*l.TokenBytes]
		if string(got) != string(exp) {
			return fmt.Errorf("row %d (group %d token %d slot %d): tokens differ", row, o.Group, o.Token, o.Slot)
		}
		for s := 0; s < l.Scales; s++ {
			if math.Float32bits(d.Scales[row*l.Scales+s]) != math.Float32bits(w.Scales[row*l.Scales+s]) {
				return fmt.Errorf("row %d: scale %d differs", row, s)
			}
		}
	}
	return nil
}
