package fabric

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Between groups of n and m NICs, the lanes of a default single write or
// paged write reach every NIC of the target; equal groups keep NIC i on
// NIC i; every choice is a valid target NIC.
func TestRemoteNICStripes(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		for _, m := range []int{1, 2, 4} {
			hit := make([]int, m)
			for k := 0; k < lanes(n, m); k++ {
				d := k % n // the round-robin cursor from 0
				r := remoteNIC(d, k, n, m)
				require.True(t, r >= 0 && r < m, "%d to %d: lane %d -> nic %d", n, m, k, r)
				if n == m {
					require.Equal(t, d, r, "equal groups keep their rails")
				}
				hit[r]++
			}
			for r, h := range hit {
				require.Equal(t, lanes(n, m)/m, h, "%d to %d: target nic %d carries its share", n, m, r)
			}
			// Scatter: ShardBytes slices of consecutive targets, and
			// ShardPeers blocks, spread over the target too.
			hit = make([]int, m)
			for j := 0; j < m; j++ {
				for d := 0; d < n; d++ {
					hit[remoteNIC(d, scatterLane(j, d, n), n, m)]++
				}
			}
			for r, h := range hit {
				require.Equal(t, n, h, "%d to %d: scatter slices on target nic %d", n, m, r)
			}
		}
	}
}
