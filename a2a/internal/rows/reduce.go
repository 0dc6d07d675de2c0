package rows

import (
	"encoding/binary"
	"math"
	"sync"
	"unsafe"

	"github.com/ferryrdma/ferry/a2a"
)

// Reducer computes combine's weighted sums (Reduce). It holds the scratch
// one call needs, so a call allocates nothing; one goroutine uses it at a
// time. With helpers it splits the tokens of a call over them; Close
// stops them.
type Reducer struct {
	l   *a2a.Layout
	acc []float32        // Hidden floats: the pure Go loop's sums
	ys  []unsafe.Pointer // a token's rows that count (dropped copies left out)
	ws  []float32        // their weights
	vec *combineKernel   // nil: the pure Go loop

	helpers []*helper
	calls   sync.WaitGroup // the helpers' parts of the call in progress
	running sync.WaitGroup // the helpers' goroutines
}

// helper is a goroutine that reduces a range of a call's tokens with its
// own scratch.
type helper struct {
	r    *Reducer
	jobs chan reduceJob
}

type reduceJob struct {
	sp     *a2a.SendPlan
	out    *a2a.CombineOutput
	row    func(pos int32) []byte
	lo, hi int
}

// NewReducer returns a Reducer for l, using the vector loops this CPU runs
// (see kernelFor) unless the build has the purego tag. threads is how
// many goroutines a call splits its tokens over, the caller's included (at
// most 1 means the caller's alone): more pays where the machine has cores
// no rank or engine worker keeps busy.
func NewReducer(l *a2a.Layout, threads int) *Reducer {
	r := newReducer(l)
	for i := 1; i < threads; i++ {
		h := &helper{r: newReducer(l), jobs: make(chan reduceJob)}
		r.helpers = append(r.helpers, h)
		r.running.Add(1)
		go r.runHelper(h)
	}
	return r
}

func newReducer(l *a2a.Layout) *Reducer {
	K := l.ExpertsPerToken
	return &Reducer{l: l, acc: make([]float32, l.Hidden), ys: make([]unsafe.Pointer, K), ws: make([]float32, K),
		vec: kernelFor(l.CombineType)}
}

func (r *Reducer) runHelper(h *helper) {
	defer r.running.Done()
	for j := range h.jobs {
		h.r.reduceRange(j.sp, j.out, j.row, j.lo, j.hi)
		r.calls.Done()
	}
}

// Close stops the helpers and waits for them. It is idempotent; Reduce
// must not run during or after it.
func (r *Reducer) Close() {
	for _, h := range r.helpers {
		close(h.jobs)
	}
	r.helpers = nil
	r.running.Wait()
}

// Vector names the loop the Reducer runs: "avx512", "avx2" or "go".
func (r *Reducer) Vector() string {
	if r.vec == nil {
		return "go"
	}
	return r.vec.name
}

// Reduce computes combine's output for every token of the plan: out[t] =
// (accumulate ? out[t] : 0) + sum over k of w[t][k]*y, y being the combine
// row at the copy's layout position, read by row(pos); dropped copies
// (inactive experts) are left out of the sum. Every step rounds as
// a2a.MulAdd does (product rounded to float32, then the sum; no fused
// multiply-add), k in order, and the sum is rounded once to the combine
// type, to nearest with ties to even: the vector loops give the same bits
// as the pure Go loop (ReduceGo) for every input that is not NaN.
//
// NaN: wherever the Go loop's result is NaN the vector loops' is NaN too,
// and where one NaN met numbers it is the same NaN (sign and payload kept,
// quiet bit set). Where two NaNs meet (a NaN sum and a NaN product), which
// one survives is the CPU's choice and may differ, as it may between
// compilers and on a GPU.
//
// With helpers, each goroutine takes a range of tokens: the results do not
// depend on the split.
func (r *Reducer) Reduce(sp *a2a.SendPlan, out *a2a.CombineOutput, row func(pos int32) []byte) {
	n := len(r.helpers) + 1
	if n == 1 || sp.Tokens < 2*n {
		r.reduceRange(sp, out, row, 0, sp.Tokens)
		return
	}
	part := (sp.Tokens + n - 1) / n
	r.calls.Add(n - 1)
	for i, h := range r.helpers {
		lo := min((i+1)*part, sp.Tokens)
		h.jobs <- reduceJob{sp: sp, out: out, row: row, lo: lo, hi: min(lo+part, sp.Tokens)}
	}
	r.reduceRange(sp, out, row, 0, part)
	r.calls.Wait()
}

// reduceRange reduces tokens [lo, hi).
func (r *Reducer) reduceRange(sp *a2a.SendPlan, out *a2a.CombineOutput, row func(pos int32) []byte, lo, hi int) {
	if r.vec == nil {
		reduceGo(r.l, sp, out, r.acc, row, lo, hi)
		return
	}
	l := r.l
	K := l.ExpertsPerToken
	os := orDefault(out.OutStride, l.CombineBytes)
	for t := lo; t < hi; t++ {
		dst := out.Out[t*os : t*os+l.CombineBytes]
		n := 0
		for k := 0; k < K; k++ {
			c := sp.Copy(t*K + k)
			if c.Path == a2a.PathDropped {
				continue // an inactive rank's expert adds nothing
			}
			y := row(c.Pos)[:l.CombineBytes]
			r.ys[n] = unsafe.Pointer(unsafe.SliceData(y))
			r.ws[n] = out.Weights[t*K+k]
			n++
		}
		r.token(dst, out.Accumulate, n)
	}
}

// token reduces one token's n rows (r.ys, r.ws) into dst: the vector loop
// over the elements its width divides, the Go loop over the rest.
func (r *Reducer) token(dst []byte, accumulate bool, n int) {
	H := r.l.Hidden
	vn := H &^ (r.vec.width - 1)
	if vn > 0 {
		r.vec.fn(unsafe.Pointer(unsafe.SliceData(dst)), unsafe.SliceData(r.ys), unsafe.SliceData(r.ws), n, vn, accumulate)
	}
	if vn < H {
		r.tail(dst, accumulate, n, vn, r.l.CombineType.Size())
	}
}

// tail runs the Go loop over elements [lo, Hidden) of one token whose n
// rows are in r.ys.
func (r *Reducer) tail(dst []byte, accumulate bool, n, lo, es int) {
	l := r.l
	acc := r.acc[:l.Hidden-lo]
	dst = dst[lo*es:]
	if accumulate {
		decodeRow(l.CombineType, acc, dst)
	} else {
		clear(acc)
	}
	for k := 0; k < n; k++ {
		y := unsafe.Slice((*byte)(r.ys[k]), l.CombineBytes)[lo*es:]
		addRow(l.CombineType, acc, r.ws[k], y)
	}
	encodeRow(l.CombineType, dst, acc)
}

// ReduceGo is Reduce in pure Go, the reference the vector loops are
// checked against and the loop every other CPU runs. acc is scratch of
// Hidden floats.
func ReduceGo(l *a2a.Layout, sp *a2a.SendPlan, out *a2a.CombineOutput, acc []float32, row func(pos int32) []byte) {
	reduceGo(l, sp, out, acc, row, 0, sp.Tokens)
}

// reduceGo is ReduceGo over tokens [lo, hi).
func reduceGo(l *a2a.Layout, sp *a2a.SendPlan, out *a2a.CombineOutput, acc []float32, row func(pos int32) []byte, lo, hi int) {
	K, ct, H := l.ExpertsPerToken, l.CombineType, l.Hidden
	os := orDefault(out.OutStride, l.CombineBytes)
	acc = acc[:H]
	for t := lo; t < hi; t++ {
		dst := out.Out[t*os : t*os+l.CombineBytes]
		if out.Accumulate {
			decodeRow(ct, acc, dst)
		} else {
			clear(acc)
		}
		for k := 0; k < K; k++ {
			c := sp.Copy(t*K + k)
			if c.Path == a2a.PathDropped {
				continue // an inactive rank's expert adds nothing
			}
			addRow(ct, acc, out.Weights[t*K+k], row(c.Pos))
		}
		encodeRow(ct, dst, acc)
	}
}

// The per-type loops keep the element decode inline: a type switch per
// element costs more than the arithmetic. Each step is a2a.MulAdd's: the
// product rounded to float32, then the sum (no fused multiply-add).

func addRow(ct a2a.DType, acc []float32, w float32, y []byte) {
	switch ct {
	case a2a.BF16:
		addBF16(acc, w, y)
	case a2a.FP16:
		addFP16(acc, w, y)
	default:
		addFP32(acc, w, y)
	}
}

// decodeRow widens a row of type ct into acc, encodeRow rounds acc into a
// row (a2a.EncodeFloat32's rounding), one loop per type.
func decodeRow(ct a2a.DType, acc []float32, src []byte) {
	switch ct {
	case a2a.BF16:
		src = src[:2*len(acc)]
		for x := range acc {
			acc[x] = math.Float32frombits(uint32(src[2*x])<<16 | uint32(src[2*x+1])<<24)
		}
	case a2a.FP16:
		src = src[:2*len(acc)]
		for x := range acc {
			acc[x] = a2a.FP16ToFloat32(uint16(src[2*x]) | uint16(src[2*x+1])<<8)
		}
	default:
		src = src[:4*len(acc)]
		for x := range acc {
			acc[x] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*x:]))
		}
	}
}

func encodeRow(ct a2a.DType, dst []byte, acc []float32) {
	switch ct {
	case a2a.BF16:
		dst = dst[:2*len(acc)]
		for x, v := range acc {
			binary.LittleEndian.PutUint16(dst[2*x:], a2a.BF16FromFloat32(v))
		}
	case a2a.FP16:
		dst = dst[:2*len(acc)]
		for x, v := range acc {
			binary.LittleEndian.PutUint16(dst[2*x:], a2a.FP16FromFloat32(v))
		}
	default:
		dst = dst[:4*len(acc)]
		for x, v := range acc {
			binary.LittleEndian.PutUint32(dst[4*x:], math.Float32bits(v))
		}
	}
}

func addBF16(acc []float32, w float32, y []byte) {
	y = y[:2*len(acc)]
	for x := range acc {
		v := math.Float32frombits(uint32(y[2*x])<<16 | uint32(y[2*x+1])<<24)
		acc[x] += float32(w * v)
	}
}

func addFP16(acc []float32, w float32, y []byte) {
	y = y[:2*len(acc)]
	for x := range acc {
		v := a2a.FP16ToFloat32(uint16(y[2*x]) | uint16(y[2*x+1])<<8)
		acc[x] += float32(w * v)
	}
}

func addFP32(acc []float32, w float32, y []byte) {
	y = y[:4*len(acc)]
	for x := range acc {
		v := math.Float32frombits(binary.LittleEndian.Uint32(y[4*x:]))
		acc[x] += float32(w * v)
	}
}

// combineKernel is a vector loop over the first n elements of one token
// (n a multiple of width): dst = (accumulate ? dst : 0) + sum over the k
// rows ys of ws[i]*ys[i], in the rounding Reduce states.
type combineKernel struct {
	name  string
	width int
	fn    func(dst unsafe.Pointer, ys *unsafe.Pointer, ws *float32, k, n int, accumulate bool)
}

// kernelFor returns the widest vector loop for ct this CPU runs (nil:
// none, or the type is not combine capable).
func kernelFor(ct a2a.DType) *combineKernel {
	if !ct.CombineCapable() {
		return nil
	}
	if ks := kernels(ct); len(ks) > 0 {
		return &ks[0]
	}
	return nil
}
