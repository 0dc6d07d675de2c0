package workload

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

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
func RandomGroups(rng *rand.Rand, l *a2a.Layout, skew bool) []reference.GroupInput {
	return randomGroups(rng, l, skew, -1)
}

// randomGroups is RandomGroups with every group's token count fixed at
// tokens, or drawn when tokens < 0.
func randomGroups(rng *rand.Rand, l *a2a.Layout, skew bool, tokens int) []reference.GroupInput {
	K, E := l.ExpertsPerToken, l.Experts
	hot := rng.IntN(E)
	groups := make([]reference.GroupInput, l.Groups)
	for h := range groups {
		m := tokens
		if m < 0 {
			m = rng.IntN(l.MaxTokens + 1)
			if rng.IntN(5) == 0 {
				m = l.MaxTokens
			}
		}
		g := reference.GroupInput{
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

// RandomActive draws which of W ranks are active: all of them one time in
// three, otherwise each inactive with probability 1/3; rank (when >= 0)
// and at least one rank are always active.
func RandomActive(rng *rand.Rand, W, rank int) []bool {
	active := make([]bool, W)
	all := rng.IntN(3) == 0
	for q := range active {
		active[q] = all || q == rank || rng.IntN(3) != 0
	}
	if rank < 0 {
		active[rng.IntN(W)] = true
	}
	return active
}

// ExpertOutputs plays the experts: a deterministic function of each
// dispatched row, in the combine type (nil for a rank that received
// nothing, an inactive one).
func ExpertOutputs(l *a2a.Layout, d []reference.Dispatched) [][]byte {
	ys := make([][]byte, len(d))
	for r := range d {
		if d[r].X == nil {
			continue
		}
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

// Iteration is one iteration's inputs and the oracle's answers.
type Iteration struct {
	Active     []bool // the ranks taking part (nil: all)
	Groups     []reference.GroupInput
	Want       []reference.Dispatched // per rank
	Ys         [][]byte               // expert outputs per rank
	Prev       [][]byte               // per group: output before combine
	WantOut    [][]byte               // per group: combine result
	Accumulate bool
}

// NewIteration draws an iteration from rng; every rank drawing from the
// same seed gets the same one.
func NewIteration(rng *rand.Rand, cfg a2a.Config, l *a2a.Layout) (*Iteration, error) {
	return newIteration(rng, cfg, l, -1)
}

func newIteration(rng *rand.Rand, cfg a2a.Config, l *a2a.Layout, tokens int) (*Iteration, error) {
	return build(rng, cfg, l, randomGroups(rng, l, rng.IntN(4) == 0, tokens), nil, nil)
}

// NewIterationActive is NewIteration for a world where only the ranks
// with active[q] take part (nil: all), with the masked oracle's answers
// (reference.DispatchActive, CombineActive).
func NewIterationActive(rng *rand.Rand, cfg a2a.Config, l *a2a.Layout, active []bool) (*Iteration, error) {
	return build(rng, cfg, l, randomGroups(rng, l, rng.IntN(4) == 0, -1), nil, active)
}

// BenchIteration draws the fixed inputs of a benchmark case: every group
// sends exactly tokens tokens (0 to MaxTokens), routed uniformly, and
// combine overwrites the output (no accumulation), so replaying the same
// step gives the same results.
func BenchIteration(rng *rand.Rand, cfg a2a.Config, l *a2a.Layout, tokens int) (*Iteration, error) {
	if tokens < 0 || tokens > l.MaxTokens {
		return nil, fmt.Errorf("%d tokens not in [0, %d]: %w", tokens, l.MaxTokens, a2a.ErrInvalidArgument)
	}
	accumulate := false
	return build(rng, cfg, l, randomGroups(rng, l, false, tokens), &accumulate, nil)
}

// build completes an iteration of groups with the oracle's answers;
// accumulate nil draws it from rng.
func build(rng *rand.Rand, cfg a2a.Config, l *a2a.Layout, groups []reference.GroupInput, accumulate *bool, active []bool) (*Iteration, error) {
	it := &Iteration{Groups: groups, Active: active}
	var err error
	if it.Want, err = reference.DispatchActive(cfg, it.Groups, active); err != nil {
		return nil, err
	}
	it.Ys = ExpertOutputs(l, it.Want)
	if accumulate != nil {
		it.Accumulate = *accumulate
	} else {
		it.Accumulate = rng.IntN(2) == 0
	}
	it.Prev = make([][]byte, l.Groups)
	for h := range it.Prev {
		it.Prev[h] = make([]byte, it.Groups[h].Tokens*l.CombineBytes)
		for i := 0; i < it.Groups[h].Tokens*l.Hidden; i++ {
			a2a.EncodeFloat32(l.CombineType, it.Prev[h], i, rng.Float32())
		}
	}
	it.WantOut, err = reference.CombineActive(cfg, it.Groups, it.Want, it.Ys, it.Prev, it.Accumulate, active)
	return it, err
}

// RunRank is Run for one rank of a world whose ranks live in different
// processes: every rank draws the same inputs from seed, runs its own
// part, and checks its own results. It returns the first mismatch.
func RunRank(ctx context.Context, cfg a2a.Config, c *a2a.Context, rank int, seed uint64, iters int) error {
	return runRank(ctx, cfg, c, rank, seed, iters, -1)
}

// RunRankTokens is RunRank with every group sending exactly tokens tokens
// (0 to MaxTokens), the shape of one benchmark case.
func RunRankTokens(ctx context.Context, cfg a2a.Config, c *a2a.Context, rank int, seed uint64, iters, tokens int) error {
	if tokens < 0 || tokens > c.Layout().MaxTokens {
		return fmt.Errorf("%d tokens not in [0, %d]: %w", tokens, c.Layout().MaxTokens, a2a.ErrInvalidArgument)
	}
	return runRank(ctx, cfg, c, rank, seed, iters, tokens)
}

// RunRankActive is RunRank in a world where only the ranks with
// active[q] take part (this rank among them), checked against the masked
// oracle, drop reports included. Every member draws the same inputs.
func RunRankActive(ctx context.Context, cfg a2a.Config, c *a2a.Context, rank int, seed uint64, iters int, active []bool) error {
	return runRankActive(ctx, cfg, c, rank, seed, iters, -1, active)
}

func runRank(ctx context.Context, cfg a2a.Config, c *a2a.Context, rank int, seed uint64, iters, tokens int) error {
	return runRankActive(ctx, cfg, c, rank, seed, iters, tokens, nil)
}

func runRankActive(ctx context.Context, cfg a2a.Config, c *a2a.Context, rank int, seed uint64, iters, tokens int, active []bool) error {
	rng := rand.New(rand.NewPCG(seed, 99))
	l := c.Layout()
	for it := 0; it < iters; it++ {
		in, err := build(rng, cfg, l, randomGroups(rng, l, rng.IntN(4) == 0, tokens), nil, active)
		if err != nil {
			return err
		}
		g := &in.Groups[l.Group(rank)]
		dout := a2a.DispatchOutput{
			ExpertTokens:   make([]int32, l.LocalExperts),
			ExpertOffsets:  make([]int32, l.LocalExperts+1),
			X:              make([]byte, l.OutputRows*l.TokenBytes),
			Scales:         make([]float32, l.OutputRows*l.Scales),
			DroppedExperts: make([]int32, l.Experts),
		}
		cout := a2a.CombineOutput{
			Out:        append([]byte(nil), in.Prev[l.Group(rank)]...),
			Weights:    g.Weights,
			Accumulate: in.Accumulate,
		}
		din := a2a.DispatchInput{Tokens: g.Tokens, X: g.X, Scales: g.Scales, Indices: g.Indices}
		if err := c.Dispatch(ctx, &din, &dout); err != nil {
			return fmt.Errorf("iteration %d dispatch: %w", it, err)
		}
		if err := Compare(l, &in.Want[rank], &dout); err != nil {
			return fmt.Errorf("iteration %d: %w", it, err)
		}
		if err := CheckDropped(l, g, active, &dout); err != nil {
			return fmt.Errorf("iteration %d: %w", it, err)
		}
		if err := c.Combine(ctx, &a2a.CombineInput{Y: in.Ys[rank]}, &cout); err != nil {
			return fmt.Errorf("iteration %d combine: %w", it, err)
		}
		if string(cout.Out) != string(in.WantOut[l.Group(rank)]) {
			return fmt.Errorf("iteration %d: combine output differs from the oracle", it)
		}
	}
	return nil
}

// CheckDropped compares the drop report of a dispatch of g's tokens with
// the copies g routes to inactive ranks (active nil: all active).
func CheckDropped(l *a2a.Layout, g *reference.GroupInput, active []bool, d *a2a.DispatchOutput) error {
	want := make([]int32, l.Experts)
	total := 0
	for _, e := range g.Indices[:g.Tokens*l.ExpertsPerToken] {
		if active != nil && !active[l.Owner(int(e))] {
			want[e]++
			total++
		}
	}
	if d.Dropped != total {
		return fmt.Errorf("%d copies reported dropped, %d routed to inactive ranks", d.Dropped, total)
	}
	if d.DroppedExperts != nil {
		for e, n := range want {
			if d.DroppedExperts[e] != n {
				return fmt.Errorf("expert %d: %d copies reported dropped, want %d", e, d.DroppedExperts[e], n)
			}
		}
	}
	return nil
}

// Compare checks a dispatch output against the oracle's, row for row.
func Compare(l *a2a.Layout, w *reference.Dispatched, d *a2a.DispatchOutput) error {
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
