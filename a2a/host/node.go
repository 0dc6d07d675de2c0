package host

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/fabric"
)

// NodeMemory gives the ranks of one NVLink domain (here: ranks on one
// host) load/store access to each other's transport buffers, the host
// analogue of NVLink peer mappings.
type NodeMemory interface {
	// Share allocates this rank's send and receive buffers (zeroed, page
	// aligned, outside the Go heap, at least the sizes asked) and, once
	// every rank of the domain has allocated, returns all of them indexed
	// by node-local rank (this rank's own included).
	Share(ctx context.Context, sendBytes, recvBytes int) (send, recv [][]byte, err error)
	// Close releases the mappings. A domain's memory may be freed only once
	// every member closed, since peers read each other's buffers until then.
	Close() error
}

// NodeRejoiner is a NodeMemory whose domain can take back a restarted
// member while other members stay active: the members still running map
// the newcomer's buffers in place of its dead incarnation's, and it maps
// theirs. The backend drives it from a2a.Context.SetActiveRanks, once
// every member is quiet; LocalNode's and ProcessNode's members are
// NodeRejoiners.
type NodeRejoiner interface {
	NodeMemory
	// Alloc allocates this rank's buffers alone, in place of Share, for a
	// backend built to join: the slices have one entry per node-local
	// rank, nil but this rank's, until Reshare.
	Alloc(sendBytes, recvBytes int) (send, recv [][]byte, err error)
	// Offer prepares this member's part in a reshare of generation gen and
	// returns what its node peers need to reach it (published through the
	// membership's exchange).
	Offer(gen uint32) ([]byte, error)
	// Reshare maps the buffers of the members whose offers are not nil
	// (by node-local rank, this one's included) in place of whatever was
	// mapped for them, and releases the mappings of every other peer; it
	// returns every buffer, as Share does. Every member with an offer
	// calls it together; it ends with ctx (ErrTimeout, naming who did not
	// come). offers == nil withdraws the last Offer and maps nothing.
	Reshare(ctx context.Context, gen uint32, offers [][]byte) (send, recv [][]byte, err error)
}

// LocalNode is a domain whose ranks live in one process: they share
// plain mmap'd buffers, each freed once no member holds it any more
// (its owner closed and every peer that mapped it closed or moved on to a
// newer incarnation). Safe for concurrent use by its members.
type LocalNode struct {
	size  int
	mu    sync.Mutex
	meets map[uint32]*localMeeting // by generation; 0 is the first Share
}

// localBufs is one member incarnation's buffers, with how many members
// hold them (guarded by LocalNode.mu).
type localBufs struct {
	send, recv *fabric.HostBuffer
	refs       int
}

// localMeeting gathers the buffers of count members. A member that gives
// up before everyone came withdraws its buffers, so no one maps buffers
// their owner already released.
type localMeeting struct {
	bufs  []*localBufs // by node-local rank
	in    int          // members present
	count int
	ready chan struct{}
	taken int // members that took the result
}

// NewLocalNode returns a domain of size members.
func NewLocalNode(size int) *LocalNode {
	return &LocalNode{size: size, meets: make(map[uint32]*localMeeting)}
}

// Member returns the NodeMemory of node-local rank i. A restarted rank
// takes a new Member of the same index (after the old one closed) and
// builds its backend to join.
func (n *LocalNode) Member(i int) NodeMemory { return &localMember{n: n, i: i} }

type localMember struct {
	n      *LocalNode
	i      int
	own    *localBufs
	held   []*localBufs // by node-local rank: what this member maps (own included)
	used   bool
	closed bool
}

var _ NodeRejoiner = (*localMember)(nil)

func (m *localMember) alloc(sendBytes, recvBytes int) error {
	if m.used || m.i < 0 || m.i >= m.n.size {
		return fmt.Errorf("local node member %d of %d: share twice or out of range: %w", m.i, m.n.size, a2a.ErrInvalidArgument)
	}
	m.used = true
	s, err := fabric.AllocHost(sendBytes)
	if err != nil {
		return err
	}
	r, err := fabric.AllocHost(recvBytes)
	if err != nil {
		_ = s.Free()
		return err
	}
	m.own = &localBufs{send: s, recv: r, refs: 1}
	m.held = make([]*localBufs, m.n.size)
	m.held[m.i] = m.own
	return nil
}

func (m *localMember) views() (send, recv [][]byte) {
	send, recv = make([][]byte, len(m.held)), make([][]byte, len(m.held))
	for i, b := range m.held {
		if b != nil {
			send[i], recv[i] = b.send.Bytes(), b.recv.Bytes()
		}
	}
	return send, recv
}

func (m *localMember) Share(ctx context.Context, sendBytes, recvBytes int) ([][]byte, [][]byte, error) {
	if err := m.alloc(sendBytes, recvBytes); err != nil {
		return nil, nil, err
	}
	all := make([]bool, m.n.size)
	for i := range all {
		all[i] = true
	}
	if err := m.meet(ctx, 0, all); err != nil {
		return nil, nil, err
	}
	s, r := m.views()
	return s, r, nil
}

func (m *localMember) Alloc(sendBytes, recvBytes int) ([][]byte, [][]byte, error) {
	if err := m.alloc(sendBytes, recvBytes); err != nil {
		return nil, nil, err
	}
	s, r := m.views()
	return s, r, nil
}

// Offer needs nothing: the members meet in the process.
func (m *localMember) Offer(uint32) ([]byte, error) { return []byte{}, nil }

func (m *localMember) Reshare(ctx context.Context, gen uint32, offers [][]byte) ([][]byte, [][]byte, error) {
	if offers == nil {
		return nil, nil, nil
	}
	if m.own == nil || m.closed || len(offers) != m.n.size || offers[m.i] == nil {
		return nil, nil, fmt.Errorf("local node member %d: reshare without buffers or offer: %w", m.i, a2a.ErrInvalidArgument)
	}
	in := make([]bool, m.n.size)
	for i, o := range offers {
		in[i] = o != nil
	}
	if err := m.meet(ctx, gen, in); err != nil {
		return nil, nil, err
	}
	s, r := m.views()
	return s, r, nil
}

// meet gathers the buffers of the members in (by node-local rank) at the
// meeting of generation gen and makes m hold exactly those.
func (m *localMember) meet(ctx context.Context, gen uint32, in []bool) error {
	n := m.n
	count := 0
	for _, ok := range in {
		if ok {
			count++
		}
	}
	n.mu.Lock()
	mt := n.meets[gen]
	if mt == nil {
		mt = &localMeeting{bufs: make([]*localBufs, n.size), count: count, ready: make(chan struct{})}
		n.meets[gen] = mt
	}
	if mt.count != count || mt.bufs[m.i] != nil {
		n.mu.Unlock()
		return fmt.Errorf("local node member %d: meeting %d of %d members, this one says %d, or joined twice: %w",
			m.i, gen, mt.count, count, a2a.ErrInvalidArgument)
	}
	mt.bufs[m.i] = m.own
	mt.in++
	if mt.in == mt.count {
		close(mt.ready)
	}
	n.mu.Unlock()
	select {
	case <-mt.ready:
	case <-ctx.Done():
		n.mu.Lock()
		select {
		case <-mt.ready: // everyone came meanwhile: go on
		default:
			mt.bufs[m.i] = nil
			mt.in--
			var missing []int
			for i, ok := range in {
				if ok && mt.bufs[i] == nil && i != m.i {
					missing = append(missing, i)
				}
			}
			n.mu.Unlock()
			return fmt.Errorf("local node member %d: node-local ranks %v did not come: %w: %w", m.i, missing, a2a.ErrTimeout, ctx.Err())
		}
		n.mu.Unlock()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for i, b := range mt.bufs {
		if i == m.i || b == m.held[i] {
			continue
		}
		if b != nil {
			b.refs++
		}
		errs = append(errs, n.release(m.held[i]))
		m.held[i] = b
	}
	if mt.taken++; mt.taken == mt.count {
		delete(n.meets, gen)
	}
	return errors.Join(errs...)
}

// release drops one hold of b, freeing it with the last. Call with mu held.
func (n *LocalNode) release(b *localBufs) error {
	if b == nil {
		return nil
	}
	if b.refs--; b.refs > 0 {
		return nil
	}
	return errors.Join(b.send.Free(), b.recv.Free())
}

func (m *localMember) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	m.n.mu.Lock()
	defer m.n.mu.Unlock()
	var errs []error
	for i, b := range m.held {
		errs = append(errs, m.n.release(b))
		m.held[i] = nil
	}
	return errors.Join(errs...)
}
