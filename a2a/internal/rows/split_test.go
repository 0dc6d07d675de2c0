package rows

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
)

// TestReduceSplit checks that a Reducer splitting its tokens over helpers
// gives the bits of the pure Go loop over a whole plan (dropped copies
// none, accumulate on and off, token counts that do not divide evenly,
// fewer tokens than helpers), and that Close ends the helpers.
func TestReduceSplit(t *testing.T) {
	before := runtime.NumGoroutine()
	rng := rand.New(rand.NewPCG(9, 4))
	for _, ct := range []a2a.DType{a2a.BF16, a2a.FP16, a2a.FP32} {
		p := newPlanner(t, 2, 37, 72, 16, 4, ct)
		l := p.Layout()
		recv := make([]byte, l.RecvRows*l.CombineRow)
		for i := range recv {
			recv[i] = byte(rng.Uint32())
		}
		row := func(pos int32) []byte { return recv[int(pos)*l.CombineRow : int(pos+1)*l.CombineRow] }
		for _, threads := range []int{0, 2, 3, 5} {
			r := NewReducer(l, threads)
			for _, T := range []int{37, 7, 1} {
				planRandom(t, p, rng, T)
				for _, accumulate := range []bool{false, true} {
					init := make([]byte, T*l.CombineBytes)
					for i := range init {
						init[i] = byte(rng.Uint32())
					}
					w := make([]float32, T*l.ExpertsPerToken)
					for i := range w {
						w[i] = float32(rng.NormFloat64())
					}
					want := &a2a.CombineOutput{Out: append([]byte(nil), init...), Weights: w, Accumulate: accumulate}
					got := &a2a.CombineOutput{Out: append([]byte(nil), init...), Weights: w, Accumulate: accumulate}
					ReduceGo(l, p.Send(), want, make([]float32, l.Hidden), row)
					r.Reduce(p.Send(), got, row)
					for x := 0; x < T*l.Hidden; x++ {
						g, wv := element32(ct, got.Out, x), element32(ct, want.Out, x)
						if g != wv && !(isNaN(ct, got.Out, x) && isNaN(ct, want.Out, x)) {
							t.Fatalf("%v threads %d T %d acc %v: element %d is %#x, want %#x", ct, threads, T, accumulate, x, g, wv)
						}
					}
				}
			}
			r.Close()
			r.Close()
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before", n, before)
	}
}
