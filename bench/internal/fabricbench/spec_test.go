package fabricbench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

func TestParseSizes(t *testing.T) {
	got, err := ParseSizes("64, 4K,4KiB,4kb,1M,2G,100B")
	require.NoError(t, err)
	require.Equal(t, []uint64{64, 4096, 4096, 4096, 1 << 20, 2 << 30, 100}, got)
	for _, bad := range []string{"", "x", "0", "4X", "K", "-1", "99999999999999G"} {
		_, err := ParseSizes(bad)
		require.ErrorIs(t, err, fabric.ErrInvalidArgument, bad)
	}
	w, err := ParseWorkloads("imm,paged,imm")
	require.NoError(t, err)
	require.Equal(t, []string{Imm, Paged}, w)
	_, err = ParseWorkloads("scatter")
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)
}

// The default run is the reference's set: paged 10000 B x 200, six page
// sizes x {10000, 100} pages, single 10000 B, 1 KiB to 64 MiB, and the
// immediate; every case is checked unless Verify is off.
func TestDefaultCases(t *testing.T) {
	s := Spec{Verify: true}.WithDefaults()
	require.NoError(t, s.Validate())
	cs := s.Cases()
	require.Len(t, cs, 1+12+1+17+1)
	require.Equal(t, Case{Workload: Paged, Bytes: 10000, Pages: 200, Iters: 67, Warmup: 33, Verify: true}, cs[0])
	last := cs[len(cs)-2]
	require.Equal(t, uint64(64<<20), last.Bytes)
	require.Equal(t, 3, last.Iters, "large cases run few iterations")
	require.Equal(t, 100, cs[len(cs)-1].Iters)
	for _, c := range cs {
		require.LessOrEqual(t, c.Warmup, 50)
	}
	for _, c := range cs {
		require.True(t, c.Verify, "%+v", c)
	}
	s.Verify = false
	require.Len(t, s.Cases(), 1+12+1+17+1)
	for _, c := range s.Cases() {
		require.False(t, c.Verify, "%+v", c)
	}
	s.Sizes = []uint64{4096}
	require.Len(t, s.Cases(), 2+1+1, "--sizes drops the reference's 10000 B cases")
	s.Sizes = nil
	s.Iters, s.Warmup = 7, 0
	for _, c := range s.Cases() {
		require.Equal(t, 7, c.Iters)
		require.Zero(t, c.Warmup)
	}
}

func TestLayout(t *testing.T) {
	const span = 4 << 20
	l, err := NewLayout(Case{Workload: Paged, Bytes: 10000, Pages: 200}, 1, span)
	require.NoError(t, err)
	seen := map[uint32]bool{}
	for i, p := range l.Indices {
		require.False(t, seen[p], "page %d repeats index %d", i, p)
		seen[p] = true
		require.LessOrEqual(t, l.pageOffset(i)+10000, uint64(span))
	}
	again, _ := NewLayout(Case{Workload: Paged, Bytes: 10000, Pages: 200}, 1, span)
	require.Equal(t, l, again, "same seed, same layout")
	// More pages than fit: repeats, still in range.
	l, err = NewLayout(Case{Workload: Paged, Bytes: 64 << 10, Pages: 1000}, 1, span)
	require.NoError(t, err)
	for i := range l.Indices {
		require.LessOrEqual(t, l.pageOffset(i)+64<<10, uint64(span))
	}
	_, err = NewLayout(Case{Workload: Single, Bytes: span}, 1, span)
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)

	buf := make([]byte, span)
	c := Case{Workload: Paged, Bytes: 10000, Pages: 200}
	l, _ = NewLayout(c, 1, span)
	fillCase(buf, c, l, 9, 2)
	require.NoError(t, checkCase(buf, c, l, 9, 2))
	require.ErrorIs(t, checkCase(buf, c, l, 9, 3), ErrVerify, "another writer's pattern")
	poisonCase(buf, c, l)
	require.ErrorIs(t, checkCase(buf, c, l, 9, 2), ErrVerify)
}

func TestSummarize(t *testing.T) {
	c := Case{Workload: Paged, Bytes: 1000, Pages: 10, Warmup: 1, Verify: true}
	r := Summarize(c, []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}, 2, 100e9)
	require.Equal(t, 3, r.Iters)
	require.Equal(t, 3, r.Lat.N)
	require.InDelta(t, 2000, r.Lat.Mean, 1e-6)
	require.InDelta(t, 1000, r.Lat.SD, 1e-6)
	require.InDelta(t, 2000, r.Lat.P50, 1e-6)
	require.InDelta(t, 3000, r.Lat.P99, 1e-6)
	require.InDelta(t, 1000, r.Lat.Min, 1e-6)
	require.InDelta(t, 3000, r.Lat.Max, 1e-6)
	// 10000 bytes and 10 writes per iteration, 3 iterations in 6 ms:
	// 40 Mbit/s and 5000 writes/s.
	require.InDelta(t, 0.04, r.Gbps, 1e-9)
	require.InDelta(t, 0.005, r.Mops, 1e-12)
	require.InDelta(t, r.Mops/2, r.MopsPerNIC, 1e-12)
	require.NotNil(t, r.LinkPct)
	require.InDelta(t, r.Gbps, *r.LinkPct, 1e-9, "100 Gbps link: percent equals Gbps")
	require.True(t, r.Checked, "a checked case")
	require.False(t, r.Verified, "the target verifies, not the writer's figures")
	require.Nil(t, Summarize(c, []time.Duration{time.Millisecond}, 1, 0).LinkPct)
	require.Zero(t, Summarize(c, nil, 1, 0).Iters)
}
