package ipc

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func mapped(t testing.TB, n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Munmap(b) })
	return b
}

// TestCopyMem: every size copies exactly, with and without helpers, and a
// job reused right after a copy never sees a helper of the last one.
func TestCopyMem(t *testing.T) {
	calls := acquireHelpers()
	defer releaseHelpers()
	src, dst := mapped(t, 3*parallelMin+5), mapped(t, 3*parallelMin+5)
	for i := range src {
		src[i] = byte(i*13 + i>>12)
	}
	for _, c := range []chan<- copyCall{nil, calls} {
		j := copyJob{calls: c}
		for _, n := range []int{0, 1, 4096, parallelMin - 1, parallelMin, parallelMin + copyChunk + 3, 3*parallelMin + 5} {
			clear(dst)
			j.copyMem(uintptr(unsafeAddr(dst)), uintptr(unsafeAddr(src)), uint64(n))
			require.True(t, bytes.Equal(src[:n], dst[:n]), "%d bytes", n)
			require.True(t, n == len(dst) || dst[n] == 0, "%d bytes: nothing past the end", n)
			require.Zero(t, j.active.Load())
		}
	}
}

// BenchmarkCopyMem compares one goroutine's copy with the worker and its
// helpers (GOMAXPROCS-1 of them) on sizes around the split threshold.
func BenchmarkCopyMem(b *testing.B) {
	calls := acquireHelpers()
	defer releaseHelpers()
	for _, n := range []int{1 << 20, 8 << 20, 64 << 20} {
		src, dst := mapped(b, n), mapped(b, n)
		for i := range src {
			src[i] = byte(i)
		}
		copy(dst, src) // fault the pages in
		for _, mode := range []struct {
			name  string
			calls chan<- copyCall
		}{{"worker", nil}, {"helpers", calls}} {
			b.Run(fmt.Sprintf("%s/%dMiB", mode.name, n>>20), func(b *testing.B) {
				j := copyJob{calls: mode.calls}
				b.SetBytes(int64(n))
				for b.Loop() {
					j.copyMem(uintptr(unsafeAddr(dst)), uintptr(unsafeAddr(src)), uint64(n))
				}
			})
		}
	}
}

// TestCopyBytesStream: the streaming copy is exact at every alignment of
// destination and source, for sizes around its head, bulk and tail.
func TestCopyBytesStream(t *testing.T) {
	if !haveStream {
		t.Skip("no streaming stores on this CPU: copyBytes is Go's copy")
	}
	const max = 1<<20 + 300
	src, dst := mapped(t, max+64), mapped(t, max+64)
	for i := range src {
		src[i] = byte(i*31 + i>>9)
	}
	for _, n := range []int{0, 1, 127, 128, 255, 256, 257, 4096 + 77, 1<<20 + 13} {
		for _, do := range []int{0, 1, 7, 31, 32, 33} {
			for _, so := range []int{0, 3, 32} {
				clear(dst)
				copyBytes(uintptr(unsafeAddr(dst))+uintptr(do), uintptr(unsafeAddr(src))+uintptr(so), uint64(n), true)
				require.True(t, bytes.Equal(src[so:so+n], dst[do:do+n]), "n %d, dst+%d, src+%d", n, do, so)
				require.Zero(t, dst[do+n], "n %d, dst+%d: a byte past the end", n, do)
				if do > 0 {
					require.Zero(t, dst[do-1], "n %d, dst+%d: a byte before the start", n, do)
				}
			}
		}
	}
}
