package a2a

import (
	"encoding/binary"
	"math"
)

// The conversions below are what combine uses to read expert outputs and to
// round its fp32 sums. They round to nearest, ties to even (the IEEE default
// and what the GPU's cvt.rn does), so a host result can be compared bit for
// bit with an oracle. NaNs stay NaNs: the sign and the top payload bits are
// kept and the quiet bit is forced, because truncating a signalling NaN's
// payload could otherwise turn it into an infinity.

// BF16FromFloat32 rounds f to bfloat16.
func BF16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x0040
	}
	// Adding 0x7fff plus the lowest kept bit rounds half to even; a carry
	// out of the mantissa correctly bumps the exponent (up to infinity).
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// BF16ToFloat32 widens a bfloat16 exactly.
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// FP16FromFloat32 rounds f to IEEE binary16, with subnormals, overflow to
// infinity and ties to even.
func FP16FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00 | uint16(man>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // biased binary16 exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Below 2^-25 everything rounds to zero (2^-25 itself is a tie
		// between 0 and the smallest subnormal and goes to the even 0).
		if e < -10 {
			return sign
		}
		m := man | 0x800000
		shift := uint(14 - e) // 14..24: to units of 2^-24
		h := m >> shift
		rem := m & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && h&1 == 1) {
			h++ // may carry into the smallest normal, which is right
		}
		return sign | uint16(h)
	}
	h := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // may carry into the exponent, up to infinity
	}
	return sign | uint16(h)
}

// FP16ToFloat32 widens an IEEE binary16 exactly.
func FP16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		// Subnormal: man * 2^-24 is exact in float32.
		v := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// DecodeFloat32 reads element i of a little-endian row of type t as float32.
// t must be combine capable.
func DecodeFloat32(t DType, row []byte, i int) float32 {
	switch t {
	case BF16:
		return BF16ToFloat32(binary.LittleEndian.Uint16(row[2*i:]))
	case FP16:
		return FP16ToFloat32(binary.LittleEndian.Uint16(row[2*i:]))
	default:
		return math.Float32frombits(binary.LittleEndian.Uint32(row[4*i:]))
	}
}

// EncodeFloat32 rounds v to t and stores it as element i of a little-endian
// row. t must be combine capable.
func EncodeFloat32(t DType, row []byte, i int, v float32) {
	switch t {
	case BF16:
		binary.LittleEndian.PutUint16(row[2*i:], BF16FromFloat32(v))
	case FP16:
		binary.LittleEndian.PutUint16(row[2*i:], FP16FromFloat32(v))
	default:
		binary.LittleEndian.PutUint32(row[4*i:], math.Float32bits(v))
	}
}

// MulAdd returns acc + w*y with both operations rounded to float32 one at a
// time. The explicit conversion forbids the compiler from fusing them into
// an FMA (which Go allows on some architectures), so every backend that runs
// on a CPU and the oracle agree bit for bit.
func MulAdd(acc, w, y float32) float32 {
	return acc + float32(w*y)
}
