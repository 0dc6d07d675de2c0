package rdma

// PeerMapper is an optional interface of domains whose writes are the
// initiator's own stores into its mapping of the target's memory (ipc):
// it lends that mapping, so a caller that knows where its bytes go can
// store them there itself, once, instead of staging them for a write,
// and then post a zero-byte write to carry the immediate (which the
// domain orders after the caller's stores, as after its own copy).
type PeerMapper interface {
	// PeerRegion returns this domain's mapping of the region with remote
	// key key at peer, when it has one (a domain may map a region only at
	// the first write to it); ok false otherwise. Called from the owner
	// of the domain's data path (the engine's worker).
	PeerRegion(peer PeerID, key uint64) (r PeerRegion, ok bool)
}

// PeerRegion is a peer's registered region mapped into this process. Its
// bytes may be written only between an Acquire that returned true and the
// matching Release: the domain takes the mapping away when the peer
// unregisters the region or is lost, and waits for the holders to let go
// first, so a holder keeps it for a bounded copy, never across waits.
// Acquire, Release and Bytes are safe from any goroutine.
type PeerRegion interface {
	// Acquire holds the mapping; false means it is being taken away (the
	// caller writes through the engine instead, and learns why there).
	Acquire() bool
	Release()
	// Bytes is the region, from its first byte: usable while held.
	Bytes() []byte
}
