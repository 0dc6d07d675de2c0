package rows

import (
	"math/rand/v2"
	"testing"

	"github.com/ferryrdma/ferry/a2a"
)

// BenchmarkReduce times combine's reduction of the decode shape (128
// tokens, top-8, hidden 7168) per combine type, the pure Go loop against
// the vector loop this CPU runs; MB/s counts the expert rows consumed
// (T*K rows of CombineBytes).
func BenchmarkReduce(b *testing.B) {
	for _, ct := range []a2a.DType{a2a.BF16, a2a.FP16, a2a.FP32} {
		p := newPlanner(b, 2, 128, 7168, 256, 8, ct)
		l := p.Layout()
		T, K := l.MaxTokens, l.ExpertsPerToken
		rng := rand.New(rand.NewPCG(1, 2))
		planRandom(b, p, rng, T)
		recv := make([]byte, l.RecvRows*l.CombineRow)
		for i := range recv {
			recv[i] = byte(rng.Uint32() & 0x3f) // finite values of every type
		}
		out := &a2a.CombineOutput{Out: make([]byte, T*l.CombineBytes), Weights: make([]float32, T*K)}
		for i := range out.Weights {
			out.Weights[i] = 1.0 / float32(K)
		}
		row := func(pos int32) []byte { return recv[int(pos)*l.CombineRow : int(pos+1)*l.CombineRow] }
		consumed := int64(T * K * l.CombineBytes)
		b.Run(ct.String()+"/go", func(b *testing.B) {
			acc := make([]float32, l.Hidden)
			b.SetBytes(consumed)
			for b.Loop() {
				ReduceGo(l, p.Send(), out, acc, row)
			}
		})
		for _, kern := range kernels(ct) {
			r := NewReducer(l, 1)
			r.vec = &kern
			b.Run(ct.String()+"/"+r.Vector(), func(b *testing.B) {
				b.SetBytes(consumed)
				b.ReportAllocs()
				for b.Loop() {
					r.Reduce(p.Send(), out, row)
				}
			})
		}
	}
}

// newPlanner returns the planner of a world of W single-rank domains.
func newPlanner(tb testing.TB, W, T, H, E, K int, ct a2a.DType) *a2a.Planner {
	tb.Helper()
	p, err := a2a.NewPlanner(a2a.Config{WorldSize: W, NVLinkSize: 1, MaxTokens: T, Hidden: H,
		DispatchType: a2a.FP8, CombineType: ct, Experts: E, ExpertsPerToken: K})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// planRandom plans the send side of T tokens, each routed to K distinct
// random experts.
func planRandom(tb testing.TB, p *a2a.Planner, rng *rand.Rand, T int) {
	tb.Helper()
	l := p.Layout()
	K := l.ExpertsPerToken
	idx := make([]uint32, T*K)
	for t := 0; t < T; t++ {
		perm := rng.Perm(l.Experts)
		for k := 0; k < K; k++ {
			idx[t*K+k] = uint32(perm[k])
		}
	}
	if err := p.PlanSend(idx, T); err != nil {
		tb.Fatal(err)
	}
}
