package host

// SharedCopies returns how many copies b sent as references to a token
// row stored once in the receiver's buffer.
func SharedCopies(b *Backend) uint64 { return b.sh.refs }

// TokenRowIters returns how many iterations since New stored their token
// rows with cached stores and how many streamed them.
func TokenRowIters(b *Backend) (cached, streamed uint64) { return b.sh.cachedIters, b.sh.streamedIters }

// SetTokenCacheBudget sets the bytes of token rows (times the host's
// ranks) that may go with cached stores in one phase, in place of half
// the shared cache.
func SetTokenCacheBudget(b *Backend, n int) { b.sh.cacheBudget = n }
