package host

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/ferryrdma/ferry/a2a"
)

// Node peers coming back (a2a.Context.SetActiveRanks with an Exchange).
//
// Each member of a domain knows its own incarnation (0 for buffers shared
// at New, a random number for buffers allocated to join) and the
// incarnation of every node peer whose buffers it maps (unknown for a
// joining rank, which maps none). The membership exchange carries, after
// each member's descriptors, its incarnation, those it maps and, when its
// node memory is a NodeRejoiner, an offer (NodeRejoiner.Offer). Once
// every member is quiet (join phase 1), each member of a domain compares
// what every active member maps with what every active member is: all
// see the same messages, so all agree. If any differs (a node peer came
// back as a new process, or a member missed a peer's restart while it was
// inactive), every active member of the domain reshares
// (NodeRejoiner.Reshare): each maps the others' current buffers in place
// of the old ones and releases what it held of inactive peers. Then join
// phase 2, and the new generation runs.

// unknownIncarnation marks a node peer whose buffers are not mapped.
const unknownIncarnation = ^uint64(0)

// newIncarnation names buffers allocated to join: never 0 (buffers shared
// at New) nor unknownIncarnation.
func newIncarnation() uint64 { return rand.Uint64()>>1 | 1 }

// nodePart is one member's node message in a membership exchange.
type nodePart struct {
	inc    uint64
	maps   []uint64 // by node-local rank: the incarnation it maps
	offer  []byte   // nil: its node memory cannot reshare
	offers bool
}

// nodeExchange wraps a membership's Exchange: it appends this rank's node
// part to the descriptors and keeps every member's node part.
type nodeExchange struct {
	inner a2a.Exchanger
	b     *Backend
	gen   uint32
	parts [][]byte // every member's node part, in member order
	offer bool     // an Offer is outstanding
}

func (x *nodeExchange) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	b := x.b
	msg := binary.LittleEndian.AppendUint32(nil, uint32(len(data)))
	msg = append(msg, data...)
	msg = binary.LittleEndian.AppendUint64(msg, b.inc)
	for _, inc := range b.peerInc {
		msg = binary.LittleEndian.AppendUint64(msg, inc)
	}
	if b.rej != nil {
		offer, err := b.rej.Offer(x.gen)
		if err != nil {
			return nil, fmt.Errorf("a2a host backend: node offer: %w", err)
		}
		x.offer = true
		msg = append(msg, 1)
		msg = append(msg, offer...)
	} else {
		msg = append(msg, 0)
	}
	all, err := x.inner.AllGather(ctx, msg)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(all))
	x.parts = make([][]byte, len(all))
	for i, m := range all {
		if len(m) < 4 || int(binary.LittleEndian.Uint32(m)) > len(m)-4 {
			return nil, fmt.Errorf("a2a host backend: member %d's exchange message is truncated: %w", i, a2a.ErrInvalidArgument)
		}
		n := int(binary.LittleEndian.Uint32(m))
		out[i], x.parts[i] = m[4:4+n], m[4+n:]
	}
	return out, nil
}

// withdraw drops an outstanding offer.
func (x *nodeExchange) withdraw() {
	if x != nil && x.offer {
		x.offer = false
		_, _, _ = x.b.rej.Reshare(context.Background(), x.gen, nil)
	}
}

func (b *Backend) decodePart(m []byte) (nodePart, error) {
	S := b.l.NVLinkSize
	if len(m) < 8*(S+1)+1 {
		return nodePart{}, fmt.Errorf("a2a host backend: node part of %d bytes: %w", len(m), a2a.ErrInvalidArgument)
	}
	p := nodePart{inc: binary.LittleEndian.Uint64(m), maps: make([]uint64, S)}
	for i := range S {
		p.maps[i] = binary.LittleEndian.Uint64(m[8*(i+1):])
	}
	rest := m[8*(S+1):]
	if p.offers = rest[0] == 1; p.offers {
		p.offer = append([]byte{}, rest[1:]...)
	}
	return p, nil
}

// remapNode reshares node memory when the active members of this rank's
// domain do not all map each other's current buffers. Call it after join
// phase 1 (every member quiet), with the exchange SetActive used.
func (b *Backend) remapNode(ctx context.Context, m *a2a.Members, x *nodeExchange) error {
	defer x.withdraw()
	l := &b.l
	S := l.NVLinkSize
	parts := make([]*nodePart, S)
	i := 0
	for q := range l.WorldSize {
		if !m.Active[q] {
			continue
		}
		if i >= len(x.parts) {
			return fmt.Errorf("a2a host backend: %d exchange messages for %d members: %w", len(x.parts), m.Count, a2a.ErrInvalidArgument)
		}
		if l.Node(q) == l.Node(l.Rank) {
			p, err := b.decodePart(x.parts[i])
			if err != nil {
				return fmt.Errorf("rank %d: %w", q, err)
			}
			parts[q-b.base] = &p
		}
		i++
	}
	need := false
	for _, p := range parts {
		for j, o := range parts {
			if p != nil && o != nil && p.maps[j] != o.inc {
				need = true
			}
		}
	}
	if !need {
		return nil
	}
	offers := make([][]byte, S)
	for j, p := range parts {
		if p == nil {
			continue
		}
		if !p.offers || b.rej == nil {
			return fmt.Errorf("a2a host backend: rank %d: node peer %d came back with new buffers, and its node memory or this one's cannot map them again (not a NodeRejoiner): %w",
				l.Rank, b.base+j, a2a.ErrNotSupported)
		}
		offers[j] = p.offer
	}
	x.offer = false
	send, recv, err := b.rej.Reshare(ctx, x.gen, offers)
	if err != nil {
		return fmt.Errorf("a2a host backend: rank %d: map node peers' new buffers: %w", l.Rank, err)
	}
	b.send, b.recv = send, recv
	for j, p := range parts {
		switch {
		case p != nil:
			b.peerInc[j] = p.inc
		case j != b.me:
			b.peerInc[j] = unknownIncarnation
		}
	}
	return nil
}
