package fabric

import (
	"fmt"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// PeerMemory is a peer's registered region as this process maps it, lent
// by a transport whose writes are stores into such a mapping (ipc): see
// Engine.MapPeer. Write its bytes only between an Acquire that returned
// them and the matching Release, for a bounded copy: the transport takes
// the mapping away when the peer unregisters the region or is lost, and
// waits for holders first.
type PeerMemory struct{ r rdma.PeerRegion }

// Acquire holds the mapping and returns the region's bytes, from its
// first byte; ok false means the mapping is being taken away: write
// through the engine instead (which reports why) and ask MapPeer again
// later.
func (m *PeerMemory) Acquire() (b []byte, ok bool) {
	if !m.r.Acquire() {
		return nil, false
	}
	return m.r.Bytes(), true
}

// Release ends an Acquire.
func (m *PeerMemory) Release() { m.r.Release() }

// MapPeer returns the region dst describes as one of dev's NICs has it
// mapped, when that NIC's transport lends its mappings
// (rdma.PeerMapper: ipc) and has mapped the region already (ipc maps a
// region at the first write to it): a caller may then store its bytes
// there itself and post a zero-byte write to carry the immediate, which
// the transport delivers after those stores, as after its own copy. ok is
// false otherwise (nothing mapped yet, the peer lost), and the caller
// writes through the engine as usual; an error wrapping ErrNotSupported
// says no NIC of dev's group lends mappings (every other transport), so
// asking again is pointless.
func (e *Engine) MapPeer(dev Device, dst Descriptor) (m *PeerMemory, ok bool, err error) {
	if e == nil {
		return nil, false, errNilEngine
	}
	w, err := e.workerFor(dev)
	if err != nil {
		return nil, false, fmt.Errorf("map peer: %w", err)
	}
	lends := false
	err = e.control(w, func(w *worker) {
		for _, ds := range w.doms {
			pm, lender := ds.d.(rdma.PeerMapper)
			if !lender {
				continue
			}
			lends = true
			for _, k := range dst.NICs {
				ps := ds.peers[k.Addr]
				if ps == nil || ps.lost != nil {
					continue
				}
				r, found := pm.PeerRegion(ps.id, k.Key)
				if !found || !r.Acquire() {
					continue
				}
				whole := uint64(len(r.Bytes())) >= dst.Length
				r.Release()
				if whole {
					m, ok = &PeerMemory{r: r}, true
					return
				}
			}
		}
	})
	if err != nil {
		return nil, false, fmt.Errorf("map peer: %w", err)
	}
	if !lends {
		return nil, false, fmt.Errorf("map peer: group %s: its transport lends no mappings: %w", dev, ErrNotSupported)
	}
	return m, ok, nil
}
