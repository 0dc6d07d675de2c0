package rows

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/ferryrdma/ferry/a2a"
)

// TestPackUnpack packs tokens with Pack and PackCached (the same row
// bytes) and unpacks them, and copies them with Direct, into outputs with
// strided scales: every path gives back the token and its scales.
func TestPackUnpack(t *testing.T) {
	lay, err := a2a.Config{WorldSize: 2, NVLinkSize: 1, MaxTokens: 8, Hidden: 7168, Scales: 56,
		DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 16, ExpertsPerToken: 2}.Layout()
	if err != nil {
		t.Fatal(err)
	}
	l := &lay
	rng := rand.New(rand.NewPCG(5, 6))
	T := 8
	in := &a2a.DispatchInput{Tokens: T, X: make([]byte, T*l.TokenBytes), Scales: make([]float32, T*l.Scales)}
	for i := range in.X {
		in.X[i] = byte(rng.Uint32())
	}
	for i := range in.Scales {
		in.Scales[i] = rng.Float32()
	}
	row := scaleSlot(l) + l.ScaleBytes
	streamed, cached := make([]byte, T*row), make([]byte, T*row)
	for tok := range T {
		Pack(l, streamed[tok*row:(tok+1)*row], in, tok)
		PackCached(l, cached[tok*row:(tok+1)*row], in, tok)
	}
	Fence()
	if !bytes.Equal(streamed, cached) {
		t.Fatal("PackCached's rows differ from Pack's")
	}
	// Column-major scales in the outputs: element s of row o at s*T+o.
	out := func() *a2a.DispatchOutput {
		return &a2a.DispatchOutput{X: make([]byte, T*l.TokenBytes), Scales: make([]float32, T*l.Scales),
			ScaleTokenStride: 1, ScaleElemStride: T}
	}
	viaRows, direct := out(), out()
	for o := range T {
		tok := T - 1 - o
		Unpack(l, viaRows, o, cached[tok*row:(tok+1)*row])
		Direct(l, direct, o, in, tok)
	}
	Fence()
	for _, got := range []*a2a.DispatchOutput{viaRows, direct} {
		for o := range T {
			tok := T - 1 - o
			if !bytes.Equal(got.X[o*l.TokenBytes:(o+1)*l.TokenBytes], in.X[tok*l.TokenBytes:(tok+1)*l.TokenBytes]) {
				t.Fatalf("output row %d: token %d's bytes differ", o, tok)
			}
			for s := range l.Scales {
				if got.Scales[s*T+o] != in.Scales[tok*l.Scales+s] {
					t.Fatalf("output row %d: scale %d of token %d differs", o, s, tok)
				}
			}
		}
	}
}
