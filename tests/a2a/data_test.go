package a2a_test

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/reference"
)

// drawGroups draws one iteration's inputs for every group; every rank
// draws the same from the same generator. Iteration 0 has no token
// anywhere, iteration 1 leaves group 0 empty, iteration 2 sends every
// token's first copy to one expert (so windows overflow); the rest draw
// 1..T tokens per group.
func drawGroups(rng *rand.Rand, l *a2a.Layout, it int) []reference.GroupInput {
	K, E := l.ExpertsPerToken, l.Experts
	hot := rng.IntN(E)
	groups := make([]reference.GroupInput, l.Groups)
	for h := range groups {
		m := 1 + rng.IntN(l.MaxTokens)
		switch {
		case it == 0, it == 1 && h == 0:
			m = 0
		case it == 2:
			m = l.MaxTokens
		}
		g := reference.GroupInput{Tokens: m, X: make([]byte, m*l.TokenBytes), Scales: make([]float32, m*l.Scales),
			Indices: make([]uint32, m*K), Weights: make([]float32, m*K)}
		// Token bytes are opaque: fp8 NaN patterns included.
		for i := range g.X {
			g.X[i] = byte(rng.Uint32())
		}
		for i := range g.Scales {
			g.Scales[i] = float32(rng.NormFloat64())
		}
		for t := 0; t < m; t++ {
			perm := rng.Perm(E)
			if it == 2 {
				for i, e := range perm {
					if e == hot {
						perm[0], perm[i] = perm[i], perm[0]
					}
				}
			}
			// Weights sum to one, so the combine of a token is its expert
			// output: an independent check of the oracle's answer.
			var sum float32
			for k := 0; k < K; k++ {
				g.Indices[t*K+k] = uint32(perm[k])
				g.Weights[t*K+k] = 0.05 + rng.Float32()
				sum += g.Weights[t*K+k]
			}
			for k := 0; k < K; k++ {
				g.Weights[t*K+k] /= sum
			}
		}
		groups[h] = g
	}
	return groups
}

// act is the experts: every expert maps a token to the same vector, a
// function of the token's bytes alone, so combining a token's K results
// with weights summing to one gives that vector back.
func act(l *a2a.Layout, x []byte, i int) float32 {
	return float32(int(x[i*l.DispatchType.Size()])-128) / 16
}

// expertOutputs fills a rank's expert outputs (OutputRows rows) from its
// dispatch output.
func expertOutputs(l *a2a.Layout, x []byte) []byte {
	y := make([]byte, l.OutputRows*l.CombineBytes)
	for row := 0; row < l.OutputRows; row++ {
		xr := x[row*l.TokenBytes : (row+1)*l.TokenBytes]
		for i := 0; i < l.Hidden; i++ {
			a2a.EncodeFloat32(l.CombineType, y[row*l.CombineBytes:], i, act(l, xr, i))
		}
	}
	return y
}

// checkDispatch compares a rank's dispatch output with the oracle's:
// counts and offsets exactly, every real row's token bytes and scales bit
// for bit.
func checkDispatch(l *a2a.Layout, want *reference.Dispatched, got *a2a.DispatchOutput) error {
	for i := 0; i < l.LocalExperts; i++ {
		if got.ExpertTokens[i] != want.ExpertTokens[i] || got.ExpertOffsets[i] != want.ExpertOffset[i] {
			return fmt.Errorf("local expert %d: %d rows at %d, want %d at %d", i,
				got.ExpertTokens[i], got.ExpertOffsets[i], want.ExpertTokens[i], want.ExpertOffset[i])
		}
	}
	tb, hs := l.TokenBytes, l.Scales
	for row, o := range want.Origin {
		if o.Group < 0 {
			continue
		}
		if string(got.X[row*tb:(row+1)*tb]) != string(want.X[row*tb:(row+1)*tb]) {
			return fmt.Errorf("row %d (group %d token %d slot %d): token bytes differ", row, o.Group, o.Token, o.Slot)
		}
		for s := 0; s < hs; s++ {
			if math.Float32bits(got.Scales[row*hs+s]) != math.Float32bits(want.Scales[row*hs+s]) {
				return fmt.Errorf("row %d (group %d token %d): scale %d differs", row, o.Group, o.Token, s)
			}
		}
	}
	return nil
}

// tolerance is the combine check's (rtol, atol) per type: the expert
// output is rounded to the type once, the sum in fp32 once more.
func tolerance(t a2a.DType) (float64, float64) {
	switch t {
	case a2a.BF16:
		return 1.6e-2, 1e-5
	case a2a.FP16:
		return 2e-3, 1e-5
	}
	return 1e-5, 1e-5
}

// previous is group h's combine output before the call: quarters in
// [-1.5, 1.5], exact in every combine type, the same on every rank.
func previous(l *a2a.Layout, h, tokens int) []byte {
	p := make([]byte, tokens*l.CombineBytes)
	for i := 0; i < tokens*l.Hidden; i++ {
		a2a.EncodeFloat32(l.CombineType, p, i, float32((h*31+i*7)%13)/4-1.5)
	}
	return p
}

// checkCombine compares a group's combine output with the oracle's bit for
// bit, and with act of its own tokens (plus base, when the call
// accumulated) within the type's tolerance.
func checkCombine(l *a2a.Layout, g *reference.GroupInput, want, got, base []byte) error {
	if string(got) != string(want) {
		for i := 0; i < g.Tokens*l.Hidden; i++ {
			a, b := a2a.DecodeFloat32(l.CombineType, got, i), a2a.DecodeFloat32(l.CombineType, want, i)
			if math.Float32bits(a) != math.Float32bits(b) {
				return fmt.Errorf("combine token %d element %d: %g, oracle %g", i/l.Hidden, i%l.Hidden, a, b)
			}
		}
		return fmt.Errorf("combine output differs from the oracle past its %d tokens", g.Tokens)
	}
	rtol, atol := tolerance(l.CombineType)
	for t := 0; t < g.Tokens; t++ {
		x := g.X[t*l.TokenBytes : (t+1)*l.TokenBytes]
		for i := 0; i < l.Hidden; i++ {
			v := float64(a2a.DecodeFloat32(l.CombineType, got, t*l.Hidden+i))
			w := float64(act(l, x, i))
			if base != nil {
				w += float64(a2a.DecodeFloat32(l.CombineType, base, t*l.Hidden+i))
			}
			if math.Abs(v-w) > atol+rtol*math.Abs(w) {
				return fmt.Errorf("combine token %d element %d: %g, want %g within rtol %g", t, i, v, w, rtol)
			}
		}
	}
	return nil
}
