package host

// SharedCopies returns how many copies b sent as references to a token
// row stored once in the receiver's buffer.
func SharedCopies(b *Backend) uint64 { return b.sh.refs }
