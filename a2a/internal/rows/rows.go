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
// row at the copy's layout position, read by row(pos); dropped copies
// (inactive experts) are left out of the sum. acc is scratch of Hidden
// floats.
func Reduce(l *a2a.Layout, sp *a2a.SendPlan, out *a2a.CombineOutput, acc []float32, row func(pos int32) []byte) {
	K, ct, H := l.ExpertsPerToken, l.CombineType, l.Hidden
	os := orDefault(out.OutStride, l.CombineBytes)
	acc = acc[:H]
	for t := 0; t < sp.Tokens; t++ {
		dst := out.Out[t*os : t*os+l.CombineBytes]
		if out.Accumulate {
			for x := range acc {
				acc[x] = a2a.DecodeFloat32(ct, dst, x)
			}
		} else {
			clear(acc)
		}
		for k := 0; k < K; k++ {
			c := sp.Copy(t*K + k)
			if c.Path == a2a.PathDropped {
				continue // an inactive rank's expert adds nothing
			}
			y := row(c.Pos)
			w := out.Weights[t*K+k]
			switch ct {
			case a2a.BF16:
				addBF16(acc, w, y[:2*H])
			case a2a.FP16:
				addFP16(acc, w, y[:2*H])
			default:
				addFP32(acc, w, y[:4*H])
			}
		}
		for x, v := range acc {
			a2a.EncodeFloat32(ct, dst, x, v)
		}
	}
}

// The per-type loops keep the element decode inline: a type switch per
// element costs more than the arithmetic. Each step is a2a.MulAdd's: the
// product rounded to float32, then the sum (no fused multiply-add).

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
