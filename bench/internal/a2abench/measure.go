package a2abench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/workload"
)

// router draws top-K routings without allocating: K distinct experts per
// token, uniformly, by a partial Fisher-Yates shuffle of a reused
// permutation.
type router struct {
	perm []uint32
	k    int
}

func newRouter(experts, k int) *router {
	r := &router{perm: make([]uint32, experts), k: k}
	for i := range r.perm {
		r.perm[i] = uint32(i)
	}
	return r
}

// draw fills idx (tokens*K entries) with a fresh routing.
func (r *router) draw(rng *rand.Rand, idx []uint32) {
	p, n := r.perm, len(r.perm)
	for t := 0; t+r.k <= len(idx); t += r.k {
		for k := 0; k < r.k; k++ {
			j := k + rng.IntN(n-k)
			p[k], p[j] = p[j], p[k]
			idx[t+k] = p[k]
		}
	}
}

// rankCase is what one rank shares after a case.
type rankCase struct {
	Samples []Sample `json:"samples"`
	Check   string   `json:"check,omitempty"` // the rank's first mismatch with the oracle
	// Wire is what the rank's fabric writes carried over the timed
	// iterations (nil: the backend does not count them).
	Wire *RankWire `json:"wire,omitempty"`
	// Pairs is the rows per iteration the rank dispatched to each rank
	// (itself included), over the timed iterations.
	Pairs []uint64 `json:"pairs"`
	// FloorDispatch and FloorCombine are the rank's timed copies of each
	// phase's nominal bytes (Spec.Floor).
	FloorDispatch []time.Duration `json:"floor_dispatch,omitempty"`
	FloorCombine  []time.Duration `json:"floor_combine,omitempty"`
}

// runCase times one case of T tokens on this rank, checks it when asked,
// and gathers every rank's samples and verdicts. stream separates the
// cases' random inputs.
func runCase(ctx context.Context, spec Spec, cfg a2a.Config, l *a2a.Layout, c *a2a.Context, tc a2a.TrafficCounter,
	g Group, T, checkIters int, stream uint64) (Case, error) {
	m, err := measure(ctx, spec, l, c, tc, g, T, stream)
	if err != nil {
		return Case{}, err
	}
	if spec.Floor {
		if m.FloorDispatch, m.FloorCombine, err = floor(ctx, spec, l, g, T); err != nil {
			return Case{}, err
		}
	}
	var check string
	if checkIters > 0 {
		// Every rank draws the same iterations (one seed) and checks its
		// own part against the oracle, at this case's token count.
		cctx, cancel := context.WithTimeout(ctx, time.Duration(checkIters)*spec.Timeout)
		err := workload.RunRankTokens(cctx, cfg, c, cfg.Rank, spec.Seed+1+stream<<32, checkIters, T)
		cancel()
		if err != nil {
			check = fmt.Sprintf("rank %d: %v", cfg.Rank, err)
		}
	}
	m.Check = check
	b, err := json.Marshal(m)
	if err != nil {
		return Case{}, err
	}
	all, err := g.AllGather(ctx, b)
	if err != nil {
		return Case{}, fmt.Errorf("share the samples: %w", err)
	}
	cs := Case{Tokens: T, Checked: checkIters > 0,
		DispatchBytes: int64(T) * int64(l.ExpertsPerToken) * int64(l.TokenBytes+l.ScaleBytes),
		CombineBytes:  int64(T) * int64(l.ExpertsPerToken) * int64(l.CombineBytes)}
	for r, m := range all {
		var rc rankCase
		if err := json.Unmarshal(m, &rc); err != nil {
			return Case{}, fmt.Errorf("samples of rank %d: %w", r, err)
		}
		cs.Samples = append(cs.Samples, rc.Samples...)
		cs.Pairs = append(cs.Pairs, rc.Pairs)
		cs.FloorDispatch = append(cs.FloorDispatch, rc.FloorDispatch...)
		cs.FloorCombine = append(cs.FloorCombine, rc.FloorCombine...)
		if rc.Wire != nil {
			w := *rc.Wire
			w.Rank = r
			cs.Wire = append(cs.Wire, w)
		}
		if rc.Check != "" && cs.CheckError == "" {
			cs.CheckError = rc.Check
		}
	}
	return cs, nil
}

// measure runs the timed iterations of this rank with T tokens: their
// samples, the rows sent to each rank per iteration and, when tc counts
// them, what the rank's fabric writes carried.
func measure(ctx context.Context, spec Spec, l *a2a.Layout, c *a2a.Context, tc a2a.TrafficCounter, g Group,
	T int, stream uint64) (rankCase, error) {
	K := l.ExpertsPerToken
	rng := rand.New(rand.NewPCG(spec.Seed+stream, uint64(l.Rank)+1))
	routing := newRouter(l.Experts, K)
	indices := make([]uint32, T*K)
	x := make([]byte, T*l.TokenBytes)
	for i := range x {
		x[i] = byte(rng.Uint32())
	}
	weights := make([]float32, T*K)
	for i := range weights {
		weights[i] = 1 / float32(K)
	}
	in := a2a.DispatchInput{Tokens: T, X: x, Scales: make([]float32, T*l.Scales)}
	dout := a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), X: make([]byte, l.OutputRows*l.TokenBytes),
		Scales: make([]float32, l.OutputRows*l.Scales)}
	cin := a2a.CombineInput{Y: make([]byte, l.OutputRows*l.CombineBytes)}
	cout := a2a.CombineOutput{Out: make([]byte, T*l.CombineBytes), Weights: weights}

	var out []Sample
	var before [3]a2a.Traffic
	pairs := make([]uint64, l.WorldSize)
	for it := 0; it < spec.Warmup+spec.Iters; it++ {
		if it == spec.Warmup && tc != nil {
			before = trafficOf(tc)
		}
		// A new routing every iteration, as a serving engine sees, drawn
		// before the barrier so it is not timed.
		routing.draw(rng, indices)
		in.Indices = indices
		if it >= spec.Warmup {
			for _, e := range indices {
				pairs[l.Owner(int(e))]++
			}
		}
		var s Sample
		err := func() error {
			pctx, cancel := context.WithTimeout(ctx, spec.Timeout)
			defer cancel()
			if err := g.Barrier(pctx); err != nil {
				return err
			}
			t0 := time.Now()
			if err := c.DispatchSend(pctx, &in); err != nil {
				return err
			}
			t1 := time.Now()
			if err := c.DispatchRecv(pctx, &dout); err != nil {
				return err
			}
			t2 := time.Now()
			if err := g.Barrier(pctx); err != nil {
				return err
			}
			t3 := time.Now()
			if err := c.CombineSend(pctx, &cin); err != nil {
				return err
			}
			t4 := time.Now()
			if err := c.CombineRecv(pctx, &cout); err != nil {
				return err
			}
			t5 := time.Now()
			s = Sample{DispatchSend: t1.Sub(t0), DispatchRecv: t2.Sub(t1), CombineSend: t4.Sub(t3), CombineRecv: t5.Sub(t4)}
			return nil
		}()
		if err != nil {
			return rankCase{}, fmt.Errorf("iteration %d: %w", it, err)
		}
		if it >= spec.Warmup {
			out = append(out, s)
		}
	}
	for q := range pairs {
		pairs[q] /= uint64(spec.Iters)
	}
	if tc == nil {
		return rankCase{Samples: out, Pairs: pairs}, nil
	}
	// Once every rank is past the last iteration, every write of it has
	// been posted (the CUDA backend posts from its worker).
	bctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	if err := g.Barrier(bctx); err != nil {
		return rankCase{}, err
	}
	after := trafficOf(tc)
	n := uint64(spec.Iters)
	phase := func(i, rowBytes int) PhaseWire {
		b, r := after[i].Bytes-before[i].Bytes, after[i].Rows-before[i].Rows
		w := PhaseWire{Bytes: b / n, Rows: r / n, NominalBytes: r * uint64(rowBytes) / n}
		if r > 0 {
			w.Ratio = float64(b) / float64(r*uint64(rowBytes))
		}
		return w
	}
	return rankCase{Samples: out, Pairs: pairs, Wire: &RankWire{Route: phase(0, 4*l.RowWords),
		Dispatch: phase(1, l.TokenBytes+l.ScaleBytes), Combine: phase(2, l.CombineBytes)}}, nil
}

// floorReps is how many copies of each phase's nominal bytes floor times;
// floorSpan is the memory its copies cycle through, twice a large
// last-level cache, so each copy reads and writes memory the previous
// ones did not leave in the cache, as the phases' copies do (their
// buffers and inputs are larger than the cache).
const (
	floorReps = 20
	floorSpan = 64 << 20
)

// floor times copies of each phase's nominal bytes per rank (T*K rows of
// token and scales, then of the combine row) on every rank at once: the
// memory's speed for what the phase moves, the floor a phase's time is
// compared with. The copies cycle through buffers of floorSpan bytes in
// all, touched first so no page is faulted in while timed.
func floor(ctx context.Context, spec Spec, l *a2a.Layout, g Group, T int) (disp, comb []time.Duration, err error) {
	K := l.ExpertsPerToken
	dn, cn := T*K*(l.TokenBytes+l.ScaleBytes), T*K*l.CombineBytes
	buf := make([]byte, max(floorSpan, 2*dn, 2*cn))
	for i := range buf {
		buf[i] = byte(i)
	}
	bctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	if err := g.Barrier(bctx); err != nil {
		return nil, nil, err
	}
	for _, p := range []struct {
		n   int
		out *[]time.Duration
	}{{dn, &disp}, {cn, &comb}} {
		pairs := len(buf) / max(2*p.n, 1)
		for i := range floorReps {
			src := buf[2*p.n*(i%pairs):]
			dst := src[p.n:]
			t0 := time.Now()
			copy(dst[:p.n], src[:p.n])
			*p.out = append(*p.out, time.Since(t0))
		}
	}
	return disp, comb, nil
}

// trafficOf reads the counters of the three tags whose writes carry bytes.
func trafficOf(tc a2a.TrafficCounter) [3]a2a.Traffic {
	return [3]a2a.Traffic{tc.Traffic(a2a.TagRoute), tc.Traffic(a2a.TagDispatch), tc.Traffic(a2a.TagCombine)}
}
