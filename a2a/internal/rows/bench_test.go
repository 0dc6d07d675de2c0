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
		cfg := a2a.Config{WorldSize: 2, NVLinkSize: 1, MaxTokens: 128, Hidden: 7168, DispatchType: a2a.FP8,
			CombineType: ct, Experts: 256, ExpertsPerToken: 8}
		p, err := a2a.NewPlanner(cfg)
		if err != nil {
			b.Fatal(err)
		}
		l := p.Layout()
		T, K := l.MaxTokens, l.ExpertsPerToken
		rng := rand.New(rand.NewPCG(1, 2))
		idx := make([]uint32, T*K)
		perm := rng.Perm(l.Experts)
		for t := 0; t < T; t++ {
			rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
			for k := 0; k < K; k++ {
				idx[t*K+k] = uint32(perm[k])
			}
		}
		if err := p.PlanSend(idx, T); err != nil {
			b.Fatal(err)
		}
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
