package fabric

import (
	"fmt"
	"strings"
	"sync"
)

type peerGroupState struct {
	peers [][MaxNICs]*peerState
}

// AddPeerGroup resolves a list of peers once, for repeated scatters from
// memory on dev. peers[i][nic] is peer i's address on its NIC nic: one
// address per NIC of that peer's group (1 to MaxNICs, which need not equal
// dev's group; each scatter target's descriptor must list the same
// addresses). Adding an identical list again returns the same handle.
func (e *Engine) AddPeerGroup(dev Device, peers [][]Address) (PeerGroup, error) {
	if e == nil {
		return PeerGroup{}, errNilEngine
	}
	w, err := e.workerFor(dev)
	if err != nil {
		return PeerGroup{}, fmt.Errorf("add peer group: %w", err)
	}
	if len(peers) == 0 {
		return PeerGroup{}, fmt.Errorf("add peer group: no peers: %w", ErrInvalidArgument)
	}
	var key strings.Builder
	key.WriteString(dev.String())
	for i, p := range peers {
		if len(p) == 0 || len(p) > MaxNICs {
			return PeerGroup{}, fmt.Errorf("add peer group: peer %d has %d addresses, want 1 to %d: %w", i, len(p), MaxNICs, ErrNICMismatch)
		}
		for _, a := range p {
			key.WriteByte(0)
			key.WriteString(a.RawString())
		}
		key.WriteByte(1)
	}
	e.groups.mu.Lock()
	defer e.groups.mu.Unlock()
	if g, ok := e.groups.ids[key.String()]; ok {
		return g, nil
	}
	e.groups.next++
	g := PeerGroup{id: e.groups.next}
	var resErr error
	err = e.control(w, func(w *worker) {
		st := &peerGroupState{peers: make([][MaxNICs]*peerState, len(peers))}
		n := len(w.doms)
		for i, p := range peers {
			// Each local NIC resolves the address it will write to
			// (scatterKey picks the same one per target).
			for d := range n {
				nic := remoteNIC(d, scatterLane(i, d, n), n, len(p))
				id, err := w.doms[d].resolve(p[nic])
				if err != nil {
					resErr = fmt.Errorf("add peer group: peer %d nic %d (%s): %w", i, nic, p[nic], err)
					return
				}
				st.peers[i][d] = id
			}
		}
		w.groups[g.id] = st
	})
	if err == nil {
		err = resErr
	}
	if err != nil {
		return PeerGroup{}, err
	}
	e.groups.ids[key.String()] = g
	return g, nil
}

// groupTable numbers the engine's peer groups, guarded by mu: ids by the
// key of their addresses, next the number the next new group gets.
type groupTable struct {
	mu   sync.Mutex
	ids  map[string]PeerGroup
	next uint32
}
