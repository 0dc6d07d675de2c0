package fabric

import "math/bits"

// Sharding arithmetic, kept pure so the immediate-count contract can be
// tested without a worker.

// singleShardAlign is the granularity of single-write shards.
const singleShardAlign = 8192

// shardSize returns the size of each full shard when length bytes are
// split into n shards: ceil(length/n) rounded up to 8 KiB. Shard k covers
// [k*size, min((k+1)*size, length)); shards past the end are empty.
func shardSize(length uint64, n int) uint64 {
	if n <= 1 {
		return length
	}
	s := (length + uint64(n) - 1) / uint64(n)
	return (s + singleShardAlign - 1) / singleShardAlign * singleShardAlign
}

// shardRange returns shard k of length bytes split n ways; an empty shard
// is (0, 0): zero bytes at offset 0, so it is never out of bounds.
func shardRange(length uint64, n, k int) (off, size uint64) {
	s := shardSize(length, n)
	lo := s * uint64(k)
	if n <= 1 {
		return 0, length
	}
	if lo >= length {
		return 0, 0
	}
	return lo, min(s, length-lo)
}

// blockRange returns block k of count items divided into contiguous
// blocks of ceil(count/n): at most n non-empty blocks, fewer when count < n.
func blockRange(count, n, k int) (lo, hi int) {
	per := (count + n - 1) / n
	lo = min(k*per, count)
	return lo, min(lo+per, count)
}

// blockCount is the number of non-empty blocks blockRange yields.
func blockCount(count, n int) int {
	if count == 0 {
		return 0
	}
	per := (count + n - 1) / n
	return (count + per - 1) / per
}

// byteSlice returns slice s of length bytes split into n slices:
// [s*length/n, (s+1)*length/n), computed in 128 bits so nothing wraps and
// the last slice ends exactly at length.
func byteSlice(length uint64, n, s int) (off, size uint64) {
	lo := mulDiv(length, uint64(s), uint64(n))
	hi := mulDiv(length, uint64(s+1), uint64(n))
	if hi == lo {
		return 0, 0
	}
	return lo, hi - lo
}

func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	q, _ := bits.Div64(hi, lo, c)
	return q
}
