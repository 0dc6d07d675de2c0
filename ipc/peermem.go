package ipc

import "github.com/ferryrdma/ferry/fabric/rdma"

// PeerRegion lends the mapping of a target's region this domain made for
// its writes (rdma.PeerMapper): a caller may store into it directly, held
// as the worker's copies hold it, so a revocation (the target
// unregistering, or found dead) waits for it exactly as for them. Only
// regions mapped already are lent; the first write to a region maps it.
func (d *Domain) PeerRegion(peer rdma.PeerID, key uint64) (rdma.PeerRegion, bool) {
	if uint64(peer) >= uint64(len(d.peers)) {
		return nil, false
	}
	p := d.peers[peer]
	if p.state.Load() != peerReady {
		return nil, false
	}
	p.mu.Lock()
	m := p.installed[key]
	p.mu.Unlock()
	if m == nil || m.revoked.Load() {
		return nil, false
	}
	return m, true
}

var _ rdma.PeerMapper = (*Domain)(nil)

// Acquire, Release and Bytes make a mapping an rdma.PeerRegion.
func (m *mapping) Acquire() bool { return m.acquire() }
func (m *mapping) Release()      { m.release() }
func (m *mapping) Bytes() []byte {
	off := m.base - uintptr(unsafeAddr(m.seg.mem))
	return m.seg.mem[off : off+uintptr(m.length) : off+uintptr(m.length)]
}
