package rows

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestCopy compares Copy with the built-in copy over lengths around the
// streaming threshold and every alignment of both ends.
func TestCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	src := make([]byte, 20000)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	dst, want := make([]byte, len(src)+64), make([]byte, len(src)+64)
	for _, n := range []int{0, 1, 31, 127, streamMin - 1, streamMin, streamMin + 1, 4096, 7168, 7168 + 77, 14336, 19000} {
		for so := 0; so < 33; so += 3 {
			for do := 0; do < 64; do += 5 {
				if so+n > len(src) {
					continue
				}
				for i := range dst {
					dst[i], want[i] = 0xa5, 0xa5
				}
				Copy(dst[do:do+n], src[so:so+n])
				Fence()
				copy(want[do:do+n], src[so:so+n])
				if !bytes.Equal(dst, want) {
					t.Fatalf("n %d, source offset %d, destination offset %d: Copy differs from copy", n, so, do)
				}
			}
		}
	}
}

// BenchmarkCopyRows writes 1024 decode-shape dispatch rows from a hot
// source into one of 8 buffers in turn (a 60 MB cycle, so the destination
// is not in cache): at the transport stride (7392 bytes: token and
// scales, rows not line aligned) and at the output's (7168: the token
// bytes of DispatchOutput.X, line aligned), with the built-in copy, with
// Copy fenced once per batch (as the phases do) and with Copy fenced
// after every row (as it was before Fence).
func BenchmarkCopyRows(b *testing.B) {
	const tokenBytes, rows, nbuf = 7168, 1024, 8
	src := make([]byte, 128*(tokenBytes+224))
	for i := range src {
		src[i] = byte(i)
	}
	bufs := make([][]byte, nbuf)
	for i := range bufs {
		bufs[i] = make([]byte, rows*(tokenBytes+224))
		for j := 0; j < len(bufs[i]); j += 4096 {
			bufs[i][j] = 1 // fault every page in before the first timing
		}
	}
	for _, row := range []int{tokenBytes + 224, tokenBytes} {
		for _, mode := range []string{"copy", "stream", "stream-fence-per-row"} {
			b.Run(fmt.Sprintf("row=%d/%s", row, mode), func(b *testing.B) {
				b.SetBytes(int64(rows * row))
				k := 0
				for b.Loop() {
					dst := bufs[k%nbuf]
					k++
					for r := range rows {
						s, d := src[(r%128)*row:(r%128+1)*row], dst[r*row:(r+1)*row]
						switch mode {
						case "copy":
							copy(d, s)
						case "stream":
							Copy(d, s)
						default:
							Copy(d, s)
							Fence()
						}
					}
					Fence()
				}
			})
		}
	}
}
