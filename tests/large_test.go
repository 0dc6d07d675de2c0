package tests

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// Transfers longer than 32 bits can count. The source is anonymous memory
// (untouched pages read as the shared zero page, costing nothing) and the
// destination a fresh AllocHost buffer (pages appear as they are written):
// a 4 GiB + 1 B write then costs the destination's 4 GiB only. The test
// writes a pattern that depends on the offset into sampled pages of the
// source (both ends, both sides of 2^31 and 2^32, one page in every 128
// MiB) and checks those pages at the destination: a range skipped or
// misplaced (a length or offset cut to 32 bits) leaves zeros or the wrong
// pattern there. Only one such test runs at a time (no t.Parallel).

const (
	size31 = 1<<31 + 1
	size32 = 1<<32 + 1
	size30 = 1<<30 + 1
)

// largeKinds are the request shapes: one single write; a paged write of
// two pages of half the length each, swapped at the destination; a
// scatter of two targets of unequal halves, also swapped.
var largeKinds = []string{"single", "paged", "scatter"}

// TestLargeWrites: 2^31 + 1 and 2^32 + 1 bytes over mem and ipc. With
// FERRY_TEST_LARGE=1 (make test-large) also 4 GiB + 1 B over shm and
// tcp;ofi_rxm, and 1 GiB + 1 B over verbs (what the test VM can pin: both
// buffers are pinned whole), every request shape.
// FERRY_TEST_LARGE_TRANSPORTS (a comma list) keeps only those transports'
// cases: the test VM runs the verbs ones alone.
func TestLargeWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("large writes need about 4 GiB of memory and seconds of copying; run without -short")
	}
	if raceDetector {
		// make test runs this package twice; the plain run covers it
		// (the copies are outside Go memory, the race run adds nothing).
		t.Skip("large writes run without the race detector (make test runs them in its plain pass)")
	}
	type tc struct {
		transport string
		size      uint64
		kinds     []string
	}
	cases := []tc{
		{"mem", size31, []string{"single"}},
		{"mem", size32, largeKinds},
		{"ipc", size31, []string{"single"}},
		{"ipc", size32, largeKinds},
	}
	if os.Getenv("FERRY_TEST_LARGE") != "" {
		cases = append(cases, tc{"shm", size32, largeKinds}, tc{"tcp;ofi_rxm", size32, largeKinds},
			tc{"verbs", size30, largeKinds})
	}
	if only := os.Getenv("FERRY_TEST_LARGE_TRANSPORTS"); only != "" {
		keep := strings.Split(only, ",")
		cases = slices.DeleteFunc(cases, func(c tc) bool { return !slices.Contains(keep, c.transport) })
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%d", c.transport, c.size), func(t *testing.T) {
			largeWrites(t, c.transport, c.size, c.kinds)
		})
	}
}

func largeWrites(t *testing.T, transport string, size uint64, kinds []string) {
	// A 4 GiB write takes tens of seconds on a loaded machine: more than
	// the default request timeout.
	cfg := fabric.Config{Transport: transport, RequestTimeout: 10 * time.Minute}
	if transport == "tcp;ofi_rxm" {
		cfg.Node = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	open := func() *fabric.Engine {
		e, err := fabric.Open(ctx, cfg)
		if err != nil && transport == "verbs" {
			// In the test VM (FERRY_TEST_REQUIRE=verbs) a skip fails.
			testutil.SkipIfNotSupported(t, "verbs", err)
		}
		if err != nil {
			require.ErrorIs(t, err, fabric.ErrNotSupported)
			t.Skipf("transport %s not available here: %v", transport, err)
		}
		t.Cleanup(func() {
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer ccancel()
			require.NoError(t, e.Close(cctx))
		})
		return e
	}
	a, b := open(), open()

	half := (size + 1) / 2 // the paged and scatter halves cover [0, 2*half)
	span := 2 * half
	src, err := unix.Mmap(-1, 0, int(span), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_NORESERVE)
	require.NoError(t, err)
	defer func() { require.NoError(t, unix.Munmap(src)) }()
	samples := samplePages(span)
	for _, p := range samples {
		fillPage(src, p)
	}
	sr, err := a.Register(fabric.MemorySpan{Addr: uintptr(unsafe.Pointer(&src[0])), Len: span}, fabric.AccessLocal)
	require.NoError(t, err)
	defer func() { require.NoError(t, a.Unregister(sr)) }()

	for i, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			dst, err := fabric.AllocHost(int(span))
			require.NoError(t, err)
			defer func() { require.NoError(t, dst.Free()) }()
			dr, err := b.RegisterHost(dst, fabric.AccessRemoteWrite)
			require.NoError(t, err)
			defer func() { require.NoError(t, b.Unregister(dr)) }()
			desc, err := dr.Descriptor()
			require.NoError(t, err)
			imm := uint32(0x5100 + i)
			ctr, err := b.ImmCounter(imm)
			require.NoError(t, err)

			tr := fabric.NewTransfer()
			var imms int64
			// dstOf maps a source offset to where the request puts it.
			var dstOf func(s uint64) (uint64, bool)
			switch kind {
			case "single":
				imms = 1
				require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: sr, Length: size, Dst: desc,
					Imm: fabric.Immediate(imm)}, fabric.Notify(tr)))
				dstOf = func(s uint64) (uint64, bool) { return s, s < size }
			case "paged":
				imms = 2
				require.NoError(t, a.SubmitPaged(fabric.PagedWrite{Src: sr, SrcPages: []uint32{0, 1}, SrcStride: half,
					Dst: desc, DstPages: []uint32{1, 0}, DstStride: half, Length: half, Imm: fabric.Immediate(imm)}, fabric.Notify(tr)))
				dstOf = func(s uint64) (uint64, bool) {
					if s < half {
						return s + half, true
					}
					return s - half, true
				}
			case "scatter":
				imms = 2
				// Target 0: source [0, half) to [half, 2*half); target 1:
				// source [half, size) to [0, size-half).
				targets := []fabric.ScatterTarget{
					{Dst: desc, Length: half, SrcOffset: 0, DstOffset: half},
					{Dst: desc, Length: size - half, SrcOffset: half, DstOffset: 0},
				}
				require.NoError(t, a.SubmitScatter(fabric.ScatterWrite{Src: sr, Targets: targets, Imm: fabric.Immediate(imm)},
					fabric.Notify(tr)))
				dstOf = func(s uint64) (uint64, bool) {
					if s < half {
						return s + half, true
					}
					return s - half, s < size
				}
			}
			start := time.Now()
			require.NoError(t, tr.Wait(ctx), "%s of %d bytes over %s", kind, size, transport)
			require.NoError(t, ctr.Wait(ctx, imms))
			t.Logf("%s of %d bytes over %s: %v", kind, size, transport, time.Since(start).Round(time.Millisecond))
			got := dst.Bytes()
			checked := 0
			for _, p := range samples {
				for s := p; s < min(p+pageLen, span); s++ {
					d, ok := dstOf(s)
					if !ok {
						continue
					}
					if got[d] != pageByte(s) {
						t.Fatalf("%s over %s: source byte %d landed at %d as %#x, want %#x", kind, transport, s, d, got[d], pageByte(s))
					}
					checked++
				}
			}
			// Bytes next to a sampled page that came from unsampled (zero)
			// source pages must be zero: nothing landed twice or shifted.
			for _, p := range samples {
				if s := p + pageLen; s+pageLen <= span && !isSampled(samples, s) {
					if d, ok := dstOf(s); ok && d < span {
						require.Zero(t, got[d], "%s over %s: byte %d from unsampled source %d", kind, transport, d, s)
					}
				}
			}
			require.Greater(t, checked, 16*pageLen)
			require.Zero(t, ctr.Count(), "immediates beyond the %d expected", imms)
		})
	}
}

const pageLen = 4096

// samplePages lists the page-aligned offsets the test fills and checks,
// sorted.
func samplePages(span uint64) []uint64 {
	set := map[uint64]bool{}
	add := func(o uint64) {
		if o < span {
			set[o&^(pageLen-1)] = true
		}
	}
	for o := uint64(0); o < span; o += 128 << 20 {
		add(o)
		add(o + (o>>20*7919)%(128<<20)) // one more page at a varying place in each 128 MiB
	}
	for _, edge := range []uint64{1 << 31, 1 << 32, span} {
		add(edge - pageLen)
		add(edge)
	}
	out := make([]uint64, 0, len(set))
	for o := range set {
		out = append(out, o)
	}
	slices.Sort(out)
	return out
}

func isSampled(samples []uint64, off uint64) bool {
	_, found := slices.BinarySearch(samples, off&^(pageLen-1))
	return found
}

// pageByte is the pattern at source offset o: it changes across pages,
// within a page and past 2^32, so a misplaced range shows.
func pageByte(o uint64) byte { return byte(o*131+o>>12*7+o>>32*3) | 1 }

func fillPage(b []byte, p uint64) {
	end := min(p+pageLen, uint64(len(b)))
	for o := p; o < end; o++ {
		b[o] = pageByte(o)
	}
}
