package fabric

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestShardRangeCoversExactly(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		for _, length := range []uint64{0, 1, 127, 8191, 8192, 8193, 16385, 1 << 20, 3*8192 + 5, 64 << 20} {
			var covered uint64
			empty := 0
			for k := 0; k < n; k++ {
				off, size := shardRange(length, n, k)
				if size == 0 {
					require.Zero(t, off, "empty shards sit at offset 0")
					empty++
					continue
				}
				require.Equal(t, covered, off, "shards are contiguous")
				if n > 1 && k < n-1 && off+size < length {
					require.Zero(t, size%singleShardAlign, "full shards are 8 KiB multiples")
				}
				covered += size
			}
			require.Equal(t, length, covered, "len %d over %d shards", length, n)
		}
	}
}

func TestByteSliceCoversWithRemainder(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		for _, length := range []uint64{0, 1, 3, 1001, 1 << 33, math.MaxUint64 - 1} {
			var covered uint64
			for s := 0; s < n; s++ {
				off, size := byteSlice(length, n, s)
				if size == 0 {
					require.Zero(t, off)
					continue
				}
				require.Equal(t, covered, off)
				covered += size
			}
			require.Equal(t, length, covered, "len %d over %d slices (64-bit, remainder kept)", length, n)
		}
	}
}

func TestBlockRange(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		for count := 0; count < 40; count++ {
			next := 0
			for b := 0; b < blockCount(count, n); b++ {
				lo, hi := blockRange(count, n, b)
				require.Equal(t, next, lo)
				require.Greater(t, hi, lo, "blocks counted by blockCount are non-empty")
				next = hi
			}
			require.Equal(t, count, next)
			require.LessOrEqual(t, blockCount(count, n), n)
		}
	}
}

// TestImmediateCountContract checks the table of fabric-reference §2.3
// against the sharding the worker does, request by request, for every NIC
// count: the number of writes carrying the immediate is what a receiver
// must count.
func TestImmediateCountContract(t *testing.T) {
	for n := 1; n <= MaxNICs; n++ {
		// Single, sharded n ways: exactly n writes, empty ones included.
		for shards := 1; shards <= n; shards++ {
			require.Equal(t, shards, singleWrites(100, shards))
			require.Equal(t, shards, singleWrites(1<<20, shards))
		}
		// Paged: one per page, over at most n NICs.
		for p := 1; p < 50; p++ {
			total := 0
			for b := 0; b < blockCount(p, n); b++ {
				lo, hi := blockRange(p, n, b)
				total += hi - lo
			}
			require.Equal(t, p, total)
		}
		// Scatter: one per target (peers, pinned), one per target per NIC (bytes).
		for tgt := 1; tgt < 10; tgt++ {
			total := 0
			for b := 0; b < blockCount(tgt, n); b++ {
				lo, hi := blockRange(tgt, n, b)
				total += hi - lo
			}
			require.Equal(t, tgt, total)
			require.Equal(t, tgt*n, tgt*n)
		}
	}
}

func singleWrites(length uint64, shards int) int {
	w := 0
	for k := 0; k < shards; k++ {
		shardRange(length, shards, k)
		w++
	}
	return w
}
