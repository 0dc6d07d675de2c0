package fabric

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHistogramBuckets: a value lands in the first bucket whose bound is
// at least it, and values beyond the last bound in +Inf.
func TestHistogramBuckets(t *testing.T) {
	for _, c := range []struct {
		n    uint64
		want int
	}{{0, 0}, {1, 0}, {2, 1}, {3, 2}, {4, 2}, {5, 3}, {1024, 10}, {1025, 11}, {1 << 31, 31}, {1<<31 + 1, 32}, {1 << 40, 32}} {
		require.Equal(t, c.want, sizeBucket(c.n), "size %d", c.n)
	}
	for _, c := range []struct {
		ns   int64
		want int
	}{{-5, 0}, {0, 0}, {1, 0}, {1024, 0}, {1025, 1}, {2048, 1}, {2049, 2}, {1 << 33, 23}, {1<<33 + 1, 24}, {1 << 40, 24}} {
		require.Equal(t, c.want, latBucket(c.ns), "latency %d ns", c.ns)
	}
}

// BenchmarkHistObserve is the cost of counting one transfer in a
// worker's buckets (fabricmetrics' BenchmarkObserve is the Prometheus
// client's Observe, for comparison).
func BenchmarkHistObserve(b *testing.B) {
	var h xferHist
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.observe(reqSingle, int64(i&1023)*1000, uint64(i&65535))
	}
}
