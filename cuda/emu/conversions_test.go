package emu_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/cuda"
)

// e4m3Value is the value of a non-negative e4m3fn code below 0x7f.
func e4m3Value(c uint8) float64 {
	e, m := int(c>>3), float64(c&7)
	if e == 0 {
		return m * math.Pow(2, -9)
	}
	return (1 + m/8) * math.Pow(2, float64(e-7))
}

// e4m3Reference rounds by search over the 127 finite codes: nearest,
// ties to the even code, beyond 448 (and infinity) saturating, NaN to NaN.
func e4m3Reference(f float32) uint8 {
	sign := uint8(0)
	if math.Signbit(float64(f)) {
		sign = 0x80
	}
	x := math.Abs(float64(f))
	switch {
	case math.IsNaN(x):
		return sign | 0x7f
	case x >= 448:
		return sign | 0x7e
	}
	lo := uint8(0)
	for c := uint8(1); c <= 0x7e && e4m3Value(c) <= x; c++ {
		lo = c
	}
	if e4m3Value(lo) == x || lo == 0x7e {
		return sign | lo
	}
	d0, d1 := x-e4m3Value(lo), e4m3Value(lo+1)-x
	if d1 < d0 || (d1 == d0 && (lo+1)&1 == 0) {
		return sign | (lo + 1)
	}
	return sign | lo
}

// The header's conversions, run by a kernel, agree bit for bit with a2a's
// Go code (bf16, fp16) and with an independent reference (e4m3), on
// special values, every rounding boundary of the narrow formats and random
// floats; the widenings are checked on every 16-bit (and 8-bit) pattern.
func TestConversionsMatchGo(t *testing.T) {
	m := emuModule(t)
	var in []float32
	for _, v := range []float64{0, 1, -1, 0.5, 448, 464, 465, 480, 1e10, 65504, 65520, 65536, 1e-8, 6e-8, 2.98e-8,
		math.Inf(1), math.Inf(-1), math.NaN(), math.SmallestNonzeroFloat32, math.MaxFloat32, 1.0 / 1024, 1.0 / 512, 3.0 / 1024} {
		in = append(in, float32(v), -float32(v))
	}
	in = append(in, math.Float32frombits(0x7fa00001), math.Float32frombits(0xffc12345)) // NaN payloads
	for h := uint32(0); h < 1<<16; h++ {
		bf := math.Float32frombits(h << 16)
		in = append(in, bf, math.Float32frombits(h<<16|0x8000), math.Float32frombits(h<<16|0x7fff)) // ties and neighbours
		in = append(in, a2a.FP16ToFloat32(uint16(h)))
	}
	for c := 0; c < 127; c++ {
		lo, hi := e4m3Value(uint8(c)), e4m3Value(uint8(c+1))
		in = append(in, float32(lo), float32((lo+hi)/2), float32(math.Nextafter((lo+hi)/2, 0)), float32(math.Nextafter((lo+hi)/2, 1000)))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100000; i++ {
		in = append(in, math.Float32frombits(r.Uint32()))
	}
	n := len(in)
	mem := alloc(t, 4*n+2*n+2*n+n+12*65536+64)
	inOff, bfOff, f16Off, e4Off := 0, 4*n, 6*n, 8*n
	backOff := (9*n + 63) &^ 63
	for i, v := range in {
		mem.Uint32(i).Store(math.Float32bits(v))
	}
	s := newStream(t)
	if err := s.Launch(kernel(t, m, "conversions"), cuda.Dim3{X: 8}, cuda.Dim3{X: 256}, 0, mem.Ptr(inOff), uint32(n),
		mem.Ptr(bfOff), mem.Ptr(f16Off), mem.Ptr(e4Off), mem.Ptr(backOff)); err != nil {
		t.Fatal(err)
	}
	if err := syncStream(t, s, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	b := mem.Bytes()
	u16 := func(off, i int) uint16 { return uint16(b[off+2*i]) | uint16(b[off+2*i+1])<<8 }
	bad := 0
	for i, v := range in {
		if got, want := u16(bfOff, i), a2a.BF16FromFloat32(v); got != want {
			t.Errorf("bf16(%g = %#08x): %#04x, Go %#04x", v, math.Float32bits(v), got, want)
			bad++
		}
		if got, want := u16(f16Off, i), a2a.FP16FromFloat32(v); got != want {
			t.Errorf("fp16(%g = %#08x): %#04x, Go %#04x", v, math.Float32bits(v), got, want)
			bad++
		}
		if got, want := b[e4Off+i], e4m3Reference(v); got != want {
			t.Errorf("e4m3(%g = %#08x): %#02x, reference %#02x", v, math.Float32bits(v), got, want)
			bad++
		}
		if bad > 20 {
			t.Fatal("too many mismatches")
		}
	}
	f32 := func(i int) uint32 { return mem.Uint32(backOff/4 + i).Load() }
	for h := 0; h < 1<<16; h++ {
		if got, want := f32(3*h), math.Float32bits(a2a.BF16ToFloat32(uint16(h))); got != want {
			t.Fatalf("bf16 %#04x widened to %#08x, Go %#08x", h, got, want)
		}
		if got, want := f32(3*h+1), math.Float32bits(a2a.FP16ToFloat32(uint16(h))); got != want {
			t.Fatalf("fp16 %#04x widened to %#08x, Go %#08x", h, got, want)
		}
		if h < 256 {
			got := math.Float32frombits(f32(3*h + 2))
			if h&0x7f == 0x7f {
				if !math.IsNaN(float64(got)) {
					t.Fatalf("e4m3 %#02x widened to %g, want NaN", h, got)
				}
			} else if want := e4m3Value(uint8(h&0x7f)) * map[bool]float64{true: -1, false: 1}[h&0x80 != 0]; float64(got) != want || math.Signbit(float64(got)) != (h&0x80 != 0) {
				t.Fatalf("e4m3 %#02x widened to %g, want %g", h, got, want)
			}
		}
	}
	t.Logf("%d floats converted, every 16-bit pattern widened: bit-equal", n)
}
