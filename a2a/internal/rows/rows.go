package rows

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/ferryrdma/ferry/a2a"
)

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

// littleEndian says float32s in memory are the rows' little-endian bytes,
// so contiguous scales move with one copy.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// f32Bytes returns the bytes of v.
func f32Bytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// scaleSlot is where a row's scales start.
func scaleSlot(l *a2a.Layout) int { return (l.TokenBytes + 15) &^ 15 }

// Pack writes token t of in into the transport row dst. Pack, Unpack and
// Direct write the row's bytes with Copy: call Fence once after a batch
// of them, before publishing the rows.
func Pack(l *a2a.Layout, dst []byte, in *a2a.DispatchInput, t int) { pack(l, dst, in, t, true) }

// PackCached is Pack with cached stores: for rows a reader on this host
// takes within the phase, few enough to stay in the shared cache until
// then (it finds them there instead of in memory).
func PackCached(l *a2a.Layout, dst []byte, in *a2a.DispatchInput, t int) { pack(l, dst, in, t, false) }

func pack(l *a2a.Layout, dst []byte, in *a2a.DispatchInput, t int, stream bool) {
	xs := orDefault(in.XStride, l.TokenBytes)
	if stream {
		Copy(dst[:l.TokenBytes], in.X[t*xs:t*xs+l.TokenBytes])
	} else {
		copy(dst[:l.TokenBytes], in.X[t*xs:t*xs+l.TokenBytes])
	}
	if l.Scales == 0 {
		return
	}
	ts, es := orDefault(in.ScaleTokenStride, l.Scales), orDefault(in.ScaleElemStride, 1)
	sc := dst[scaleSlot(l):]
	if es == 1 && littleEndian {
		// Contiguous scales are the row's bytes already.
		copy(sc[:l.ScaleBytes], f32Bytes(in.Scales[t*ts:t*ts+l.Scales]))
		return
	}
	for s := 0; s < l.Scales; s++ {
		binary.LittleEndian.PutUint32(sc[4*s:], math.Float32bits(in.Scales[t*ts+s*es]))
	}
}

// Unpack writes the transport row src into output row o of out.
func Unpack(l *a2a.Layout, out *a2a.DispatchOutput, o int, src []byte) {
	xs := orDefault(out.XStride, l.TokenBytes)
	Copy(out.X[o*xs:o*xs+l.TokenBytes], src[:l.TokenBytes])
	if l.Scales == 0 {
		return
	}
	ts, es := orDefault(out.ScaleTokenStride, l.Scales), orDefault(out.ScaleElemStride, 1)
	sc := src[scaleSlot(l):]
	if es == 1 && littleEndian {
		copy(f32Bytes(out.Scales[o*ts:o*ts+l.Scales]), sc[:l.ScaleBytes])
		return
	}
	for s := 0; s < l.Scales; s++ {
		out.Scales[o*ts+s*es] = math.Float32frombits(binary.LittleEndian.Uint32(sc[4*s:]))
	}
}

// ExpertRow returns expert-output row i of in.
func ExpertRow(l *a2a.Layout, in *a2a.CombineInput, i int32) []byte {
	ys := orDefault(in.YStride, l.CombineBytes)
	return in.Y[int(i)*ys : int(i)*ys+l.CombineBytes]
}

// Direct writes token t of in into output row o of out: a copy that
// stays on its own rank skips the transport row (Pack then Unpack) and
// is copied once.
func Direct(l *a2a.Layout, out *a2a.DispatchOutput, o int, in *a2a.DispatchInput, t int) {
	xs, os := orDefault(in.XStride, l.TokenBytes), orDefault(out.XStride, l.TokenBytes)
	Copy(out.X[o*os:o*os+l.TokenBytes], in.X[t*xs:t*xs+l.TokenBytes])
	if l.Scales == 0 {
		return
	}
	its, ies := orDefault(in.ScaleTokenStride, l.Scales), orDefault(in.ScaleElemStride, 1)
	ots, oes := orDefault(out.ScaleTokenStride, l.Scales), orDefault(out.ScaleElemStride, 1)
	if ies == 1 && oes == 1 {
		copy(out.Scales[o*ots:o*ots+l.Scales], in.Scales[t*its:t*its+l.Scales])
		return
	}
	for s := 0; s < l.Scales; s++ {
		out.Scales[o*ots+s*oes] = in.Scales[t*its+s*ies]
	}
}
