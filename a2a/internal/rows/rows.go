// Package rows holds the CPU "kernels" shared by the host backend and the
// in-memory simulation: packing a token into a transport row, unpacking a
// row into the caller's output, and the combine reduction. They touch only
// the bytes a row really has (TokenBytes, then Scales float32 in their own
// 16-byte aligned slot), never the padding.
package rows

import (
	"encoding/binary"
	"math"

	"github.com/ferryrdma/ferry/a2a"
)

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// scaleSlot is where a row's scales start.
func scaleSlot(l *a2a.Layout) int { return (l.TokenBytes + 15) &^ 15 }

// Pack writes token t of in into the transport row dst.
func Pack(l *a2a.Layout, dst []byte, in *a2a.DispatchInput, t int) {
	xs := orDefault(in.XStride, l.TokenBytes)
	copy(dst[:l.TokenBytes], in.X[t*xs:t*xs+l.TokenBytes])
	if l.Scales == 0 {
		return
	}
	ts, es := orDefault(in.ScaleTokenStride, l.Scales), orDefault(in.ScaleElemStride, 1)
	sc := dst[scaleSlot(l):]
	for s := 0; s < l.Scales; s++ {
		binary.LittleEndian.PutUint32(sc[4*s:], math.Float32bits(in.Scales[t*ts+s*es]))
	}
}

// Unpack writes the transport row src into output row o of out.
func Unpack(l *a2a.Layout, out *a2a.DispatchOutput, o int, src []byte) {
	xs := orDefault(out.XStride, l.TokenBytes)
	copy(out.X[o*xs:o*xs+l.TokenBytes], src[:l.TokenBytes])
	if l.Scales == 0 {
		return
	}
	ts, es := orDefault(out.ScaleTokenStride, l.Scales), orDefault(out.ScaleElemStride, 1)
	sc := src[scaleSlot(l):]
	for s := 0; s < l.Scales; s++ {
		out.Scales[o*ts+s*es] = math.Float32frombits(binary.LittleEndian.Uint32(sc[4*s:]))
	}
}

// ExpertRow returns expert-output row i of in.
func ExpertRow(l *a2a.Layout, in *a2a.CombineInput, i int32) []byte {
	ys := orDefault(in.YStride, l.CombineBytes)
	return in.Y[int(i)*ys : int(i)*ys+l.CombineBytes]
}

// Reduce computes combine's output for every token of the plan: out[t] =
// (accumulate ? out[t] : 0) + sum over k of w[t][k]*y, y being the combine
// row at the copy's layout position, read by row(pos). acc is scratch of
// Hidden floats.
func Reduce(l *a2a.Layout, sp *a2a.SendPlan, out *a2a.CombineOutput, acc []float32, row func(pos int32) []byte) {
	K, ct := l.ExpertsPerToken, l.CombineType
	os := orDefault(out.OutStride, l.CombineBytes)
	acc = acc[:l.Hidden]
	for t := 0; t < sp.Tokens; t++ {
		dst := out.Out[t*os : t*os+l.CombineBytes]
		for x := range acc {
			acc[x] = 0
			if out.Accumulate {
				acc[x] = a2a.DecodeFloat32(ct, dst, x)
			}
		}
		for k := 0; k < K; k++ {
			y := row(sp.Copy(t*K + k).Pos)
			w := out.Weights[t*K+k]
			for x := range acc {
				acc[x] = a2a.MulAdd(acc[x], w, a2a.DecodeFloat32(ct, y, x))
			}
		}
		for x, v := range acc {
			a2a.EncodeFloat32(ct, dst, x, v)
		}
	}
}
