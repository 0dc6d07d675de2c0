package rows

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/ferryrdma/ferry/a2a"
)

// specials32 are float32 bit patterns every sum meets: zeros, infinities,
// NaNs (quiet and signalling, both signs, with payloads), subnormals, the
// extremes, and values whose bf16 or fp16 rounding is a tie.
var specials32 = []uint32{
	0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff812345,
	0x7fa00000, 0x00000001, 0x80000001, 0x007fffff, 0x00400000, 0x7f7fffff, 0xff7fffff, 0x00800000,
	0x3f808000, 0x3f818000, 0x3f800000, 0xbf800000, 0x33800000, 0x33000000, 0x38800000, 0x387fc000,
	0x477fe000, 0x477ff000, 0x3f802000, 0x3f801000, 0x3f803000, 0x3f7fffff,
}

// element draws the bits of one element of type ct: often a special,
// otherwise random bits (which cover every exponent, NaNs and subnormals
// of the 16-bit types included) or a tame value.
func element(rng *rand.Rand, ct a2a.DType) uint32 {
	switch rng.IntN(4) {
	case 0:
		s := specials32[rng.IntN(len(specials32))]
		switch ct {
		case a2a.BF16:
			return s >> 16
		case a2a.FP16:
			return uint32(a2a.FP16FromFloat32(math.Float32frombits(s)))
		}
		return s
	case 1:
		v := float32(rng.NormFloat64())
		switch ct {
		case a2a.BF16:
			return uint32(a2a.BF16FromFloat32(v))
		case a2a.FP16:
			return uint32(a2a.FP16FromFloat32(v))
		}
		return math.Float32bits(v)
	}
	if ct == a2a.FP32 {
		return rng.Uint32()
	}
	return rng.Uint32() & 0xffff
}

// weight draws a weight: mostly tame, sometimes a special or random bits.
func weight(rng *rand.Rand) float32 {
	switch rng.IntN(6) {
	case 0:
		return math.Float32frombits(specials32[rng.IntN(len(specials32))])
	case 1:
		return math.Float32frombits(rng.Uint32())
	}
	return float32(rng.Float64())
}

// put stores bits v as element i of a row of ct.
func put(ct a2a.DType, row []byte, i int, v uint32) {
	if ct == a2a.FP32 {
		binary.LittleEndian.PutUint32(row[4*i:], v)
		return
	}
	binary.LittleEndian.PutUint16(row[2*i:], uint16(v))
}

// twoNaNs reports, per element, whether the Go loop's sum ever met two
// NaNs at once (a NaN weight times a NaN element, or a NaN sum plus a NaN
// product): only there may the vector loops' NaN differ.
func twoNaNs(ct a2a.DType, dst []byte, accumulate bool, ys [][]byte, ws []float32, H int) []bool {
	out := make([]bool, H)
	nan := func(f float32) bool { return f != f }
	for x := 0; x < H; x++ {
		var acc float32
		if accumulate {
			acc = a2a.DecodeFloat32(ct, dst, x)
		}
		for k, y := range ys {
			v := a2a.DecodeFloat32(ct, y, x)
			p := float32(ws[k] * v)
			if (nan(ws[k]) && nan(v)) || (nan(acc) && nan(p)) {
				out[x] = true
			}
			acc += p
		}
	}
	return out
}

// isNaN reports whether element x of a row of ct is a NaN.
func isNaN(ct a2a.DType, row []byte, x int) bool {
	f := a2a.DecodeFloat32(ct, row, x)
	return f != f
}

// TestVectorLoopsMatchGo runs every vector loop this CPU has against the
// pure Go loop over random rows with every kind of special value, widths
// that leave tails, 0 to 8 rows per token, with and without accumulate:
// the bits must be equal, except where two NaNs met, where both must be
// NaN (see Reducer.Reduce).
func TestVectorLoopsMatchGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 5))
	ran := 0
	for _, ct := range []a2a.DType{a2a.BF16, a2a.FP16, a2a.FP32} {
		for _, kern := range kernels(ct) {
			for _, H := range []int{1, 7, 8, 9, 16, 17, 31, 48, 129} {
				for _, K := range []int{0, 1, 2, 3, 8} {
					for _, acc := range []bool{false, true} {
						name := fmt.Sprintf("%v/%s/H%d/K%d/acc=%v", ct, kern.name, H, K, acc)
						checkToken(t, name, rng, ct, kern, H, K, acc)
						ran++
					}
				}
			}
		}
	}
	if ran == 0 {
		t.Skip("this CPU runs no vector loop (the pure Go loop is used)")
	}
}

func checkToken(t *testing.T, name string, rng *rand.Rand, ct a2a.DType, kern combineKernel, H, K int, accumulate bool) {
	t.Helper()
	l := &a2a.Layout{}
	l.Hidden, l.CombineType, l.ExpertsPerToken, l.CombineBytes = H, ct, K, H*ct.Size()
	for rep := 0; rep < 20; rep++ {
		ys := make([][]byte, K)
		ws := make([]float32, K)
		for k := range ys {
			ys[k] = make([]byte, l.CombineBytes)
			for x := 0; x < H; x++ {
				put(ct, ys[k], x, element(rng, ct))
			}
			ws[k] = weight(rng)
		}
		init := make([]byte, l.CombineBytes)
		for x := 0; x < H; x++ {
			put(ct, init, x, element(rng, ct))
		}
		// The Go loop, as ReduceGo runs it for one token.
		want := append([]byte(nil), init...)
		acc := make([]float32, H)
		if accumulate {
			decodeRow(ct, acc, want)
		}
		for k := range ys {
			addRow(ct, acc, ws[k], ys[k])
		}
		encodeRow(ct, want, acc)
		// The vector loop, as Reduce runs it.
		r := &Reducer{l: l, acc: make([]float32, H), ys: make([]unsafe.Pointer, K), ws: ws, vec: &kern}
		for k := range ys {
			r.ys[k] = unsafe.Pointer(unsafe.SliceData(ys[k]))
		}
		got := append([]byte(nil), init...)
		r.token(got, accumulate, K)
		if string(got) == string(want) {
			continue
		}
		two := twoNaNs(ct, init, accumulate, ys, ws, H)
		for x := 0; x < H; x++ {
			g, w := element32(ct, got, x), element32(ct, want, x)
			if g == w {
				continue
			}
			if two[x] && isNaN(ct, got, x) && isNaN(ct, want, x) {
				continue
			}
			t.Fatalf("%s: element %d is %#x, the Go loop's %#x (init %#x, weights %v)", name, x, g, w,
				element32(ct, init, x), ws)
		}
	}
}

func element32(ct a2a.DType, row []byte, x int) uint32 {
	if ct == a2a.FP32 {
		return binary.LittleEndian.Uint32(row[4*x:])
	}
	return uint32(binary.LittleEndian.Uint16(row[2*x:]))
}
