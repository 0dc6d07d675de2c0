package fabricbench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLoopbackRead: the read workload runs beside single writes in one
// loopback run and every read case is verified by the reader.
func TestLoopbackRead(t *testing.T) {
	for _, p := range loopbackProviders {
		t.Run(p.provider, func(t *testing.T) {
			s := smallSpec(p.provider, 2)
			s.Node = p.node
			s.Workloads = []string{Read, Single}
			rep, err := Loopback(testCtx(t), s, nil)
			skipIfUnusable(t, err)
			require.NoError(t, err)
			require.Len(t, rep.Cases, 4)
			checkReport(t, rep, 4)
			// Paired in rounds, the rows keep the order of Cases and the
			// iterations the spec fixed.
			var got []string
			for _, c := range rep.Cases {
				got = append(got, c.Workload+" "+FormatBytes(c.Bytes))
				require.Equal(t, s.Iters, c.Iters, "%s %d", c.Workload, c.Bytes)
				require.Equal(t, s.Iters, c.Lat.N, "%s %d", c.Workload, c.Bytes)
			}
			require.Equal(t, []string{"read 4 KiB", "read 64 KiB", "single 4 KiB", "single 64 KiB"}, got)
		})
	}
}

// TestReadPairDefaultIters: a read and a write of a large size run at
// least pairIters iterations each when the spec leaves Iters to the
// cases, and both rows are verified by their last round.
func TestReadPairDefaultIters(t *testing.T) {
	s := Spec{Provider: "mem", NICs: 1, Verify: true, Workloads: []string{Read, Single, Imm},
		Sizes: []uint64{16 << 20}, Buffer: 17 << 20, Timeout: 60 * time.Second}
	rep, err := Loopback(testCtx(t), s, nil)
	require.NoError(t, err)
	require.Len(t, rep.Cases, 3)
	checkReport(t, rep, 3)
	alone := s.WithDefaults().Cases()[0].Iters
	require.Less(t, alone, pairIters, "the size must be one that runs fewer iterations alone")
	for _, c := range rep.Cases[:2] {
		require.Equal(t, pairIters, c.Iters, c.Workload)
		require.Equal(t, pairIters, c.Lat.N, c.Workload)
	}
	require.Equal(t, Imm, rep.Cases[2].Workload)
}

// TestReadPairs: a read pairs with the single write of its size, once;
// other cases run alone.
func TestReadPairs(t *testing.T) {
	cases := []Case{
		{Workload: Read, Bytes: 4096},
		{Workload: Read, Bytes: 1 << 20},
		{Workload: Paged, Bytes: 4096, Pages: 10},
		{Workload: Single, Bytes: 4096},
		{Workload: Read, Bytes: 8192},
		{Workload: Single, Bytes: 1 << 20},
		{Workload: Imm},
	}
	require.Equal(t, []int{3, 5, -1, 0, -1, 1, -1}, readPairs(cases))
	require.Equal(t, []int{-1}, readPairs(cases[:1]))
}

// TestRoundIters: iterations split over at most pairRounds rounds, none
// empty, the earlier ones longer.
func TestRoundIters(t *testing.T) {
	require.Equal(t, []int{1, 1, 1}, roundIters(3))
	r := roundIters(100)
	require.Len(t, r, pairRounds)
	sum := 0
	for i, n := range r {
		require.Positive(t, n)
		if i > 0 {
			require.LessOrEqual(t, n, r[i-1])
		}
		sum += n
	}
	require.Equal(t, 100, sum)
}

// TestReadCheckFails: the reader's check sees a range the read did not
// fill (poisoned) or filled with another pattern.
func TestReadCheckFails(t *testing.T) {
	c := Case{Workload: Read, Bytes: 4096}
	l, err := NewLayout(c, 1, 1<<20)
	require.NoError(t, err)
	buf := make([]byte, 1<<20)
	fillCase(buf, c, l, 1, 0)
	require.NoError(t, checkCase(buf, c, l, 1, 0))
	require.ErrorIs(t, checkCase(buf, c, l, 2, 0), ErrVerify, "another seed's pattern")
	poisonCase(buf, c, l)
	require.ErrorIs(t, checkCase(buf, c, l, 1, 0), ErrVerify, "poisoned range")
}

// TestReadRefusedInRanks: the ranks and raw modes cannot run reads.
func TestReadRefusedInRanks(t *testing.T) {
	require.Error(t, refuseRead(Spec{Workloads: []string{Single, Read}}, "ranks"))
	require.NoError(t, refuseRead(Spec{Workloads: []string{Single}}, "ranks"))
}

// TestReadPairCheckFails: a write whose check fails in the last round of
// its pair is reported FAIL with ErrVerify; the read it ran beside keeps
// its own verdict.
func TestReadPairCheckFails(t *testing.T) {
	s := smallSpec("mem", 1)
	s.Workloads = []string{Read, Single}
	s.Sizes = []uint64{64 << 10}
	s.Corrupt = func(b []byte) { b[len(b)/2] ^= 0xFF }
	rep, err := Loopback(testCtx(t), s, nil)
	require.ErrorIs(t, err, ErrVerify)
	require.Len(t, rep.Cases, 2)
	read, write := rep.Cases[0], rep.Cases[1]
	require.Equal(t, Read, read.Workload)
	require.True(t, read.Verified, "the read's check does not see the target's corruption")
	require.Empty(t, read.Error)
	require.Equal(t, s.Iters, read.Iters)
	require.True(t, write.Checked)
	require.False(t, write.Verified)
	require.NotEmpty(t, write.Error)
}
