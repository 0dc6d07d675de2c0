package fabric

import (
	"fmt"
	"strings"
)

type peerGroupState struct {
	peers [][MaxNICs]*peerState
}

// AddPeerGroup resolves a list of peers once, for repeated scatters from
// memory on dev. peers[i][nic] is peer i's address on that NIC; every peer
// needs one address per NIC of dev's group. Adding an identical list again
// returns the same handle.
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
		if len(p) != len(w.doms) {
			return PeerGroup{}, fmt.Errorf("add peer group: peer %d has %d addresses for %d nics: %w", i, len(p), len(w.doms), ErrNICMismatch)
		}
		for _, a := range p {
			key.WriteByte(0)
			key.WriteString(a.RawString())
		}
		key.WriteByte(1)
	}
	e.groupsMu.Lock()
	defer e.groupsMu.Unlock()
	if g, ok := e.groupIDs[key.String()]; ok {
		return g, nil
	}
	e.nextGroupID++
	g := PeerGroup{id: e.nextGroupID}
	var resErr error
	err = e.control(w, func(w *worker) {
		st := &peerGroupState{peers: make([][MaxNICs]*peerState, len(peers))}
		for i, p := range peers {
			for nic, a := range p {
				id, err := w.doms[nic].resolve(a)
				if err != nil {
					resErr = fmt.Errorf("add peer group: peer %d nic %d (%s): %w", i, nic, a, err)
					return
				}
				st.peers[i][nic] = id
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
	e.groupIDs[key.String()] = g
	return g, nil
}
