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

// TestShardsStayInBounds checks the arithmetic behind the immediate-count
// contract of fabric-reference §2.3: a write sharded n ways posts n shards
// (the worker loops k < n), so every shard, empty ones included, must lie
// inside the write; paged and peer-sharded scatter blocks cover every page
// or target exactly once; byte slices lie inside their target. The counts
// themselves are checked end to end, request by request, in
// fabric/fabrictest.
func TestShardsStayInBounds(t *testing.T) {
	for n := 1; n <= MaxNICs; n++ {
		for _, length := range []uint64{0, 1, 100, 8192, 1<<20 + 3} {
			for k := 0; k < n; k++ {
				off, size := shardRange(length, n, k)
				require.LessOrEqual(t, off+size, length, "shard %d of %d of %d bytes", k, n, length)
			}
			for s := 0; s < n; s++ {
				off, size := byteSlice(length, n, s)
				require.LessOrEqual(t, off+size, length, "slice %d of %d of %d bytes", s, n, length)
			}
		}
		for count := 1; count < 50; count++ {
			seen := make([]int, count)
			for b := 0; b < blockCount(count, n); b++ {
				lo, hi := blockRange(count, n, b)
				for i := lo; i < hi; i++ {
					seen[i]++
				}
			}
			for i, c := range seen {
				require.Equal(t, 1, c, "item %d of %d over %d nics", i, count, n)
			}
		}
	}
}
