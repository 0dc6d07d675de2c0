package rows

// streamMin is the smallest row Copy streams: below it the fence and the
// unaligned ends cost more than the cache misses saved.
const streamMin = 1024

// Copy copies src into dst (len(dst) >= len(src)). Where the CPU has them
// (AVX2 on amd64) rows of streamMin bytes or more are written with
// non-temporal stores, fenced before Copy returns, so whatever the caller
// publishes next (a signal, a counter) is ordered after them. A phase
// writes megabytes of rows that another core or process reads next: a
// cached store first reads each destination line it misses (half again
// the traffic) and evicts what the reader needs; a streamed line goes to
// memory once.
func Copy(dst, src []byte) {
	if len(src) < streamMin || !stream(dst[:len(src)], src) {
		copy(dst, src)
	}
}
