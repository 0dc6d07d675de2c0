package a2a

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// fp16Value is an independent decoder used as the reference: it builds the
// value from the definition of binary16 with float64 arithmetic.
func fp16Value(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	man := float64(h & 0x3ff)
	switch exp {
	case 0x1f:
		if man != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	case 0:
		return sign * math.Ldexp(man, -24)
	}
	return sign * math.Ldexp(1+man/1024, exp-15)
}

func TestFP16DecodeExhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		got := float64(FP16ToFloat32(h))
		want := fp16Value(h)
		if math.IsNaN(want) {
			if !math.IsNaN(got) {
				t.Fatalf("%#04x: got %v, want NaN", h, got)
			}
			continue
		}
		if got != want || math.Signbit(got) != math.Signbit(want) {
			t.Fatalf("%#04x: got %v, want %v", h, got, want)
		}
	}
}

func TestFP16RoundTripExhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		got := FP16FromFloat32(FP16ToFloat32(h))
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 || got&0x8000 != h&0x8000 {
				t.Fatalf("NaN %#04x became %#04x", h, got)
			}
			if h&0x200 != 0 && got != h {
				t.Fatalf("quiet NaN %#04x became %#04x", h, got)
			}
			continue
		}
		if got != h {
			t.Fatalf("%#04x round-tripped to %#04x", h, got)
		}
	}
}

// TestFP16TiesExhaustive checks, for every pair of neighbouring binary16
// values, that their midpoint rounds to the even one and that the float32
// values just beside the midpoint round to the nearer one.
func TestFP16TiesExhaustive(t *testing.T) {
	for i := 0; i < 0x7c00; i++ {
		for _, sign := range []uint16{0, 0x8000} {
			lo, hi := uint16(i)|sign, uint16(i+1)|sign
			a, b := fp16Value(lo), fp16Value(hi)
			if i+1 == 0x7c00 {
				b = math.Copysign(65536, a) // the value infinity stands in for
			}
			mid := float32((a + b) / 2)
			if float64(mid) != (a+b)/2 {
				t.Fatalf("midpoint of %#04x not exact in float32", lo)
			}
			even := lo
			if lo&1 == 1 {
				even = hi
			}
			if got := FP16FromFloat32(mid); got != even {
				t.Fatalf("tie between %#04x and %#04x: got %#04x want %#04x", lo, hi, got, even)
			}
			up := math.Nextafter32(mid, float32(math.Copysign(math.Inf(1), b)))
			down := math.Nextafter32(mid, 0)
			if got := FP16FromFloat32(up); got != hi {
				t.Fatalf("just past the tie %#04x/%#04x: got %#04x", lo, hi, got)
			}
			if got := FP16FromFloat32(down); got != lo {
				t.Fatalf("just before the tie %#04x/%#04x: got %#04x", lo, hi, got)
			}
		}
	}
}

// nearestFP16 rounds by search over the sorted non-negative finite values,
// an implementation that shares nothing with FP16FromFloat32.
func nearestFP16(table []float64, f float32) uint16 {
	v := float64(f)
	if math.IsNaN(v) {
		return 0x7e00
	}
	sign := uint16(0)
	if math.Signbit(v) {
		sign, v = 0x8000, -v
	}
	if v >= 65536 {
		return sign | 0x7c00
	}
	i := sort.SearchFloat64s(table, v) // table[i] >= v
	if table[i] == v {
		return sign | uint16(i)
	}
	lo, hi := table[i-1], table[i]
	switch {
	case v-lo < hi-v:
		return sign | uint16(i-1)
	case v-lo > hi-v:
		return sign | uint16(i)
	case (i-1)&1 == 0:
		return sign | uint16(i-1)
	}
	return sign | uint16(i)
}

func TestFP16RoundingRandom(t *testing.T) {
	// The finite values, then 2^16 in the slot of infinity: values past
	// the largest finite one round to infinity as if it were 2^16.
	table := make([]float64, 0x7c01)
	for i := range table {
		table[i] = fp16Value(uint16(i))
	}
	table[0x7c00] = 65536
	rng := rand.New(rand.NewPCG(1, 2))
	n := 1 << 20
	if testing.Short() {
		n = 1 << 14
	}
	for range n {
		// Draw exponents near binary16's range more often than not.
		var f float32
		if rng.IntN(4) == 0 {
			f = math.Float32frombits(rng.Uint32())
		} else {
			f = float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(46)-28))
		}
		got, want := FP16FromFloat32(f), nearestFP16(table, f)
		if math.IsNaN(float64(f)) {
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("NaN %#08x became %#04x", math.Float32bits(f), got)
			}
			continue
		}
		if got != want {
			t.Fatalf("%v (%#08x): got %#04x want %#04x", f, math.Float32bits(f), got, want)
		}
	}
}

func TestBF16RoundTripExhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := BF16ToFloat32(h)
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("%#04x decoded to %#08x", h, math.Float32bits(f))
		}
		got := BF16FromFloat32(f)
		if h&0x7f80 == 0x7f80 && h&0x7f != 0 {
			if got&0x7f80 != 0x7f80 || got&0x7f == 0 || got&0x8000 != h&0x8000 {
				t.Fatalf("NaN %#04x became %#04x", h, got)
			}
			if h&0x40 != 0 && got != h {
				t.Fatalf("quiet NaN %#04x became %#04x", h, got)
			}
			continue
		}
		if got != h {
			t.Fatalf("%#04x round-tripped to %#04x", h, got)
		}
	}
}

func TestBF16TiesExhaustive(t *testing.T) {
	for i := 0; i < 0x7f80; i++ {
		for _, sign := range []uint32{0, 0x8000} {
			lo, hi := uint16(uint32(i)|sign), uint16(uint32(i+1)|sign)
			mid := math.Float32frombits(uint32(lo)<<16 | 0x8000)
			even := lo
			if lo&1 == 1 {
				even = hi
			}
			if got := BF16FromFloat32(mid); got != even {
				t.Fatalf("tie %#04x/%#04x: got %#04x want %#04x", lo, hi, got, even)
			}
			if got := BF16FromFloat32(math.Float32frombits(uint32(lo)<<16 | 0x8001)); got != hi {
				t.Fatalf("past tie %#04x/%#04x: got %#04x", lo, hi, got)
			}
			if got := BF16FromFloat32(math.Float32frombits(uint32(lo)<<16 | 0x7fff)); got != lo {
				t.Fatalf("before tie %#04x/%#04x: got %#04x", lo, hi, got)
			}
		}
	}
}

func TestBF16NaNPayloads(t *testing.T) {
	// A signalling NaN whose payload lives only in the low 16 bits must not
	// become an infinity.
	for _, b := range []uint32{0x7f800001, 0xff800001, 0x7fc00000, 0x7f80ffff} {
		got := BF16FromFloat32(math.Float32frombits(b))
		if got&0x7f80 != 0x7f80 || got&0x7f == 0 {
			t.Fatalf("NaN %#08x became %#04x", b, got)
		}
		if uint32(got&0x8000)<<16 != b&0x80000000 {
			t.Fatalf("NaN %#08x lost its sign: %#04x", b, got)
		}
	}
	if got := FP16FromFloat32(math.Float32frombits(0x7f800001)); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
		t.Fatalf("fp16: signalling NaN became %#04x", got)
	}
}

func TestEncodeDecodeRows(t *testing.T) {
	for _, dt := range []DType{BF16, FP16, FP32} {
		row := make([]byte, 4*dt.Size())
		vals := []float32{1.5, -2.25, 0, 1024}
		for i, v := range vals {
			EncodeFloat32(dt, row, i, v)
		}
		for i, v := range vals {
			if got := DecodeFloat32(dt, row, i); got != v {
				t.Fatalf("%v[%d]: got %v want %v", dt, i, got, v)
			}
		}
	}
}

func TestDTypes(t *testing.T) {
	for _, c := range []struct {
		s    string
		t    DType
		size int
	}{{"fp8", FP8, 1}, {"bf16", BF16, 2}, {"fp16", FP16, 2}, {"fp32", FP32, 4}} {
		got, ok := ParseDType(c.s)
		if !ok || got != c.t || got.Size() != c.size || got.String() != c.s {
			t.Fatalf("%s: %v %v", c.s, got, ok)
		}
	}
	if _, ok := ParseDType("int8"); ok {
		t.Fatal("int8 parsed")
	}
	if DTypeInvalid.Valid() || FP8.CombineCapable() || !BF16.CombineCapable() {
		t.Fatal("predicates wrong")
	}
}
