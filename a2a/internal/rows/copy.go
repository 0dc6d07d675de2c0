package rows

// streamMin is the smallest row Copy streams: below it the unaligned ends
// cost more than the cache misses saved.
const streamMin = 1024

// Copy copies src into dst (len(dst) >= len(src)). Where the CPU has them
// (AVX2 on amd64) rows of streamMin bytes or more are written with
// non-temporal stores. A phase writes megabytes of rows that another core
// or process reads next: a cached store first reads each destination line
// it misses (half again the traffic) and evicts what the reader needs; a
// streamed line goes to memory once.
//
// The streamed stores are not fenced: a caller that copies a batch of
// rows calls Fence once after it, before it publishes them (a signal, a
// counter, a post to the engine, a return to its own caller). A fence
// per row waits for the CPU's write-combining buffers to drain every few
// kilobytes: BenchmarkCopyRows took 1.2-1.6 times as long so here.
func Copy(dst, src []byte) {
	if len(src) < streamMin || !stream(dst[:len(src)], src) {
		copy(dst, src)
	}
}

// Fence orders every row Copy, Pack, Unpack and Direct streamed before
// it ahead of every store after it, so another core or process that sees
// a later store (a signal word, a counter) sees the rows too. Call it
// once per batch of copies, before publishing them.
func Fence() { fence() }
