package a2a_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/memsim"
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

// randomConfig draws a world covering the space the planner must handle.
func randomConfig(rng *rand.Rand) a2a.Config {
	W := 1 + rng.IntN(16)
	S := pick(rng, divisors(W))
	D := pick(rng, divisors(S))
	K := 1 + rng.IntN(6)
	E := max(K, 1+rng.IntN(3*W+6))
	if rng.IntN(3) == 0 && E%W == 0 {
		E++ // make E % W != 0 common
	}
	H := 1 + rng.IntN(24)
	return a2a.Config{
		WorldSize: W, NVLinkSize: S, ReplicaSize: D, NICsPerGPU: 1 + rng.IntN(3),
		MaxTokens: 1 + rng.IntN(20), Hidden: H, Scales: rng.IntN(min(H, 5) + 1),
		DispatchType: pick(rng, []a2a.DType{a2a.FP8, a2a.BF16, a2a.FP16, a2a.FP32}),
		CombineType:  pick(rng, []a2a.DType{a2a.BF16, a2a.FP16, a2a.FP32}),
		Experts:      E, ExpertsPerToken: K,
		ExpertPadding: pick(rng, []int{1, 16, 128}),
		PrivateTokens: pick(rng, []int{a2a.NoPrivateWindow, 1, 8, 0}),
	}
}

// randomGroups draws each group's tokens; skew routes every token's first
// slot to one expert.
func randomGroups(rng *rand.Rand, l *a2a.Layout, skew bool) []reference.Group {
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

// expertOutputs plays the experts: a deterministic function of each
// dispatched row, in the combine type.
func expertOutputs(l *a2a.Layout, d []reference.Dispatched) [][]byte {
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

type simRank struct {
	c    *a2a.Context
	dout a2a.DispatchOutput
	cout a2a.CombineOutput
}

// runWorld runs iters iterations of dispatch and combine over memsim and
// compares every rank's results with the oracle.
func runWorld(t *testing.T, cfg a2a.Config, seed uint64, iters int, opt memsim.Options) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	world, err := memsim.NewWorld(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	W := cfg.WorldSize
	ranks := make([]*simRank, W)
	var l *a2a.Layout
	for r := range ranks {
		c := cfg
		c.Rank = r
		ctx, err := a2a.New(c, world.Backend(r))
		if err != nil {
			t.Fatal(err)
		}
		defer ctx.Close()
		l = ctx.Layout()
		ranks[r] = &simRank{c: ctx}
	}
	for it := 0; it < iters; it++ {
		groups := randomGroups(rng, l, rng.IntN(4) == 0)
		want, err := reference.Dispatch(cfg, groups)
		if err != nil {
			t.Fatal(err)
		}
		ys := expertOutputs(l, want)
		accumulate := rng.IntN(2) == 0
		prev := make([][]byte, l.Groups)
		for h := range prev {
			prev[h] = make([]byte, groups[h].Tokens*l.CombineBytes)
			for i := 0; i < groups[h].Tokens*l.Hidden; i++ {
				a2a.EncodeFloat32(l.CombineType, prev[h], i, rng.Float32())
			}
		}
		wantOut, err := reference.Combine(cfg, groups, want, ys, prev, accumulate)
		if err != nil {
			t.Fatal(err)
		}
		world.Poison(byte(0xa5 + it))

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		errs := make([]error, W)
		var wg sync.WaitGroup
		for r, sr := range ranks {
			g := &groups[l.Group(r)]
			sr.dout = a2a.DispatchOutput{
				ExpertTokens:  make([]int32, l.LocalExperts),
				ExpertOffsets: make([]int32, l.LocalExperts+1),
				X:             make([]byte, l.OutputRows*l.TokenBytes),
				Scales:        make([]float32, l.OutputRows*l.Scales),
			}
			sr.cout = a2a.CombineOutput{
				Out:        append([]byte(nil), prev[l.Group(r)]...),
				Weights:    g.Weights,
				Accumulate: accumulate,
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				in := a2a.DispatchInput{Tokens: g.Tokens, X: g.X, Scales: g.Scales, Indices: g.Indices}
				if err := sr.c.Dispatch(ctx, &in, &sr.dout); err != nil {
					errs[r] = fmt.Errorf("dispatch: %w", err)
					return
				}
				if err := sr.c.Combine(ctx, &a2a.CombineInput{Y: ys[r]}, &sr.cout); err != nil {
					errs[r] = fmt.Errorf("combine: %w", err)
				}
			}()
		}
		wg.Wait()
		cancel()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("iteration %d rank %d: %v", it, r, err)
			}
		}
		for r, sr := range ranks {
			w := &want[r]
			for i := 0; i < l.LocalExperts; i++ {
				if sr.dout.ExpertTokens[i] != w.ExpertTokens[i] || sr.dout.ExpertOffsets[i] != w.ExpertOffset[i] {
					t.Fatalf("iteration %d rank %d expert %d: %d tokens at %d, want %d at %d", it, r, i,
						sr.dout.ExpertTokens[i], sr.dout.ExpertOffsets[i], w.ExpertTokens[i], w.ExpertOffset[i])
				}
			}
			for row, o := range w.Origin {
				if o.Group < 0 {
					continue
				}
				got := sr.dout.X[row*l.TokenBytes : (row+1)*l.TokenBytes]
				exp := w.X[row*l.TokenBytes : (row+1)*l.TokenBytes]
				if string(got) != string(exp) {
					t.Fatalf("iteration %d rank %d row %d (group %d token %d slot %d): tokens differ", it, r, row, o.Group, o.Token, o.Slot)
				}
				for s := 0; s < l.Scales; s++ {
					if math.Float32bits(sr.dout.Scales[row*l.Scales+s]) != math.Float32bits(w.Scales[row*l.Scales+s]) {
						t.Fatalf("iteration %d rank %d row %d: scale %d differs", it, r, row, s)
					}
				}
			}
			if got, exp := sr.cout.Out, wantOut[l.Group(r)]; string(got) != string(exp) {
				t.Fatalf("iteration %d rank %d: combine output differs from the oracle", it, r)
			}
		}
	}
	if err := world.Residue(); err != nil {
		t.Fatalf("immediate counts: %v", err)
	}
}

func TestSimulatedProtocolRandom(t *testing.T) {
	n := 150
	if testing.Short() {
		n = 25
	}
	rng := rand.New(rand.NewPCG(2026, 11))
	for i := 0; i < n; i++ {
		cfg := randomConfig(rng)
		seed := rng.Uint64()
		name := fmt.Sprintf("%d/W%d_S%d_D%d_E%d_K%d_T%d_M%d_pad%d_nic%d", i, cfg.WorldSize, cfg.NVLinkSize, cfg.ReplicaSize,
			cfg.Experts, cfg.ExpertsPerToken, cfg.MaxTokens, cfg.PrivateTokens, cfg.ExpertPadding, cfg.NICsPerGPU)
		t.Run(name, func(t *testing.T) {
			opt := memsim.Options{Seed: seed}
			if i%4 == 0 {
				opt.MaxDelay = 200 * time.Microsecond
			}
			runWorld(t, cfg, seed, 3, opt)
		})
	}
}

// TestSimulatedProtocolShapes pins the corner cases the reference got wrong
// or its tests covered: replicas across domains (duplicate eager writes),
// zero tokens everywhere, no private window, G*L < K buffer sizing, padding
// overflow of the output bound.
func TestSimulatedProtocolShapes(t *testing.T) {
	base := a2a.Config{Hidden: 8, Scales: 2, DispatchType: a2a.FP8, CombineType: a2a.BF16, MaxTokens: 6}
	cases := map[string]func(c *a2a.Config){
		"replicas-across-domains": func(c *a2a.Config) {
			c.WorldSize, c.NVLinkSize, c.ReplicaSize, c.Experts, c.ExpertsPerToken = 8, 2, 2, 16, 4
		},
		"no-window-multi-nic": func(c *a2a.Config) {
			c.WorldSize, c.NVLinkSize, c.Experts, c.ExpertsPerToken, c.PrivateTokens, c.NICsPerGPU = 4, 2, 8, 2, a2a.NoPrivateWindow, 3
		},
		"one-group-small-L": func(c *a2a.Config) {
			c.WorldSize, c.NVLinkSize, c.ReplicaSize, c.Experts, c.ExpertsPerToken = 4, 4, 4, 8, 4
		},
		"padding-bound": func(c *a2a.Config) {
			c.WorldSize, c.Experts, c.ExpertsPerToken, c.ExpertPadding, c.MaxTokens = 2, 4, 2, 16, 17
		},
		"single-rank": func(c *a2a.Config) {
			c.WorldSize, c.Experts, c.ExpertsPerToken = 1, 3, 3
		},
		"ranks-without-experts": func(c *a2a.Config) {
			c.WorldSize, c.NVLinkSize, c.Experts, c.ExpertsPerToken = 8, 2, 5, 2
		},
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := base
			mod(&cfg)
			runWorld(t, cfg, 5, 4, memsim.Options{Seed: 5, MaxDelay: 100 * time.Microsecond})
		})
	}
}
