package fabricbench

import (
	"testing"

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
			reads := 0
			for _, c := range rep.Cases {
				if c.Workload == Read {
					reads++
				}
			}
			require.Equal(t, 2, reads)
		})
	}
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
