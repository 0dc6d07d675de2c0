//go:build linux

package nodeshare

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/internal/shm"
)

// Exchanger all-gathers one message per rank of the world, by world rank.
type Exchanger interface {
	AllGather(ctx context.Context, mine []byte) ([][]byte, error)
}

// Importer maps node peers' buffers into this process (and device).
type Importer[M any] interface {
	// Import maps size bytes of the file fd, which stays the caller's.
	Import(fd, size int) (M, error)
	// Release unmaps what Import returned.
	Release(m M) error
}

// Spec says who a member is and what it shares.
type Spec struct {
	World int // ranks in the world
	Rank  int // this member's world rank
	Index int // its node-local rank
	Size  int // members of the node
	// Asked are the send and receive sizes the backend asked for: every
	// member of a node must ask the same.
	Asked [2]uint64
	// Exported are the sizes of the two files, at least Asked: what a
	// peer maps.
	Exported [2]uint64
}

// DefaultTimeout bounds an exchange whose context has no deadline.
const DefaultTimeout = time.Minute

// Member is one rank's part in its node's sharing. Its methods are called
// from one goroutine.
type Member[M any] struct {
	spec   Spec
	fds    [2]int
	imp    Importer[M]
	peers  []mapped[M] // by node-local rank; this member's entry stays empty
	ln     *net.UnixListener
	closed bool
}

type mapped[M any] struct {
	buf [2]M
	ok  bool
}

// New returns the member spec describes, sharing the files fds (send,
// receive), which it owns from now on: Close closes them, on every path.
func New[M any](spec Spec, fds [2]int, imp Importer[M]) (*Member[M], error) {
	s := spec
	if s.Size <= 0 || s.Index < 0 || s.Index >= s.Size || s.Rank < s.Index || s.Rank-s.Index+s.Size > s.World ||
		s.Asked[0] == 0 || s.Asked[1] == 0 || s.Exported[0] < s.Asked[0] || s.Exported[1] < s.Asked[1] || imp == nil {
		shm.CloseAll(fds[:])
		return nil, fmt.Errorf("node share: member %+v: %w", s, a2a.ErrInvalidArgument)
	}
	return &Member[M]{spec: spec, fds: fds, imp: imp, peers: make([]mapped[M], spec.Size)}, nil
}

// Peer returns node-local rank i's buffers as mapped here; ok is false
// where none are (this member's own index, a peer not shared with).
func (m *Member[M]) Peer(i int) (send, recv M, ok bool) {
	p := m.peers[i]
	return p.buf[0], p.buf[1], p.ok
}

// Share runs the first exchange: it offers a socket, all-gathers the names
// over the world with ex, and maps every node peer's buffers. A node of
// one member exchanges nothing.
func (m *Member[M]) Share(ctx context.Context, ex Exchanger) error {
	if m.spec.Size == 1 {
		return nil
	}
	name, err := m.Offer()
	if err != nil {
		return err
	}
	names, err := ex.AllGather(ctx, name)
	if err != nil {
		_ = m.Reshare(ctx, nil)
		return fmt.Errorf("node share: exchange socket names: %w", err)
	}
	if len(names) != m.spec.World {
		_ = m.Reshare(ctx, nil)
		return fmt.Errorf("node share: %d names for %d ranks: %w", len(names), m.spec.World, a2a.ErrInvalidArgument)
	}
	base := m.spec.Rank - m.spec.Index
	return m.Reshare(ctx, names[base:base+m.spec.Size])
}

// Offer listens on a fresh socket (in place of the last offer's) and
// returns its name, for the node peers to reach this member at the next
// Reshare.
func (m *Member[M]) Offer() ([]byte, error) {
	if m.closed {
		return nil, fmt.Errorf("node share: offer after close: %w", a2a.ErrInvalidArgument)
	}
	if m.ln != nil {
		_ = m.ln.Close()
		m.ln = nil
	}
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	name := "@ferry-a2a-node-" + hex.EncodeToString(nonce[:])
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: name, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("node share: listen: %w", err)
	}
	m.ln = ln
	return []byte(name), nil
}

// Reshare exchanges buffers with the members whose offers (by node-local
// rank, this member's own included, as Offer returned them) are not nil,
// maps theirs in place of what was mapped for them, and releases the
// mappings of every peer without an offer. offers == nil withdraws the
// last Offer and changes nothing. On error nothing changed.
func (m *Member[M]) Reshare(ctx context.Context, offers [][]byte) error {
	ln := m.ln
	m.ln = nil
	if ln != nil {
		defer ln.Close()
	}
	if offers == nil {
		return nil
	}
	if ln == nil || m.closed || len(offers) != m.spec.Size || offers[m.spec.Index] == nil {
		return fmt.Errorf("node share: reshare without an offer, after close, or with %d offers for %d members: %w",
			len(offers), m.spec.Size, a2a.ErrInvalidArgument)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	got, err := m.exchange(ctx, ln, offers)
	if err != nil {
		for _, p := range got {
			m.release(p)
		}
		// The sockets' deadlines are the context's, and may pass a moment
		// before the context reports it.
		dl, _ := ctx.Deadline()
		if ctx.Err() != nil || errors.Is(err, shm.ErrTimeout) || !time.Now().Before(dl) {
			err = fmt.Errorf("%w: %w", a2a.ErrTimeout, err)
		}
		return err
	}
	var errs []error
	for i := range m.peers {
		if i != m.spec.Index {
			errs = append(errs, m.release(m.peers[i]))
			m.peers[i] = got[i]
		}
	}
	return errors.Join(errs...)
}

func (m *Member[M]) release(p mapped[M]) error {
	if !p.ok {
		return nil
	}
	return errors.Join(m.imp.Release(p.buf[0]), m.imp.Release(p.buf[1]))
}

// exchange offers this member's files to every peer named in offers and
// maps as many peers' files, accepted on ln. It returns what it mapped,
// on failure too (for the caller to release).
func (m *Member[M]) exchange(ctx context.Context, ln *net.UnixListener, offers [][]byte) ([]mapped[M], error) {
	me := m.spec.Index
	var from []int // node ranks to hear from
	for i, o := range offers {
		if o != nil && i != me {
			from = append(from, i)
		}
	}
	got := make([]mapped[M], m.spec.Size)
	if len(from) == 0 {
		return got, nil
	}
	mine := m.offer()

	// The acceptor maps what peers offer while this goroutine offers ours.
	// The first failure cancels the other side (closing the listener and
	// every connection in use) and is the one reported.
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopListener := context.AfterFunc(actx, func() { ln.Close() })
	defer stopListener()
	var mu sync.Mutex
	var first error
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		cancel()
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := m.admitAll(actx, ln, mine, offers, got, len(from)); err != nil {
			fail(err)
		}
	})
	for _, i := range from {
		if actx.Err() != nil {
			break
		}
		if err := m.offerTo(actx, string(offers[i]), mine); err != nil {
			fail(fmt.Errorf("node share: rank %d to node rank %d (world rank %d): %w", m.spec.Rank, i,
				m.spec.Rank-me+i, err))
		}
	}
	wg.Wait()
	return got, first
}

// admitAll accepts want offers, each from a different named peer, and
// maps them into got.
func (m *Member[M]) admitAll(ctx context.Context, ln *net.UnixListener, mine Offer, offers [][]byte, got []mapped[M], want int) error {
	for range want {
		c, err := ln.AcceptUnix()
		if err != nil {
			var missing []string
			for i, o := range offers {
				if o != nil && i != m.spec.Index && !got[i].ok {
					missing = append(missing, fmt.Sprintf("%d (world rank %d)", i, m.spec.Rank-m.spec.Index+i))
				}
			}
			return fmt.Errorf("node share: rank %d: no offer from node rank %s: %w", m.spec.Rank,
				strings.Join(missing, ", "), errors.Join(err, ctx.Err()))
		}
		err = m.admit(ctx, c, mine, offers, got)
		c.Close()
		if err != nil {
			return fmt.Errorf("node share: rank %d: %w", m.spec.Rank, err)
		}
	}
	return nil
}

// admit reads one offer on c, checks it against ours, imports its two
// buffers and answers. Received descriptors are closed on every path.
func (m *Member[M]) admit(ctx context.Context, c *net.UnixConn, mine Offer, offers [][]byte, got []mapped[M]) error {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	buf := make([]byte, offerSize)
	n, fds, err := shm.Receive(ctx, c, buf, 2)
	if err != nil && !errors.Is(err, shm.ErrMalformed) {
		return fmt.Errorf("read offer: %w", err)
	}
	defer shm.CloseAll(fds)
	o, derr := decodeOffer(buf[:n])
	switch {
	case err != nil:
		// err stays: a message too long or with too many descriptors.
	case len(fds) != 2:
		err = fmt.Errorf("offer with %d descriptors, want 2", len(fds))
	case derr != nil:
		err = derr
	case o.Size != mine.Size || int(o.Index) >= len(got) || o.Index == mine.Index ||
		int(o.Rank) != m.spec.Rank-int(mine.Index)+int(o.Index):
		err = fmt.Errorf("offer from node rank %d of %d (world rank %d) does not fit node rank %d of %d",
			o.Index, o.Size, o.Rank, mine.Index, mine.Size)
	case offers[o.Index] == nil:
		err = fmt.Errorf("offer from node rank %d, which is not a member now", o.Index)
	case got[o.Index].ok:
		err = fmt.Errorf("second offer from node rank %d", o.Index)
	case o.Asked != mine.Asked:
		err = fmt.Errorf("node rank %d has buffers of %d and %d bytes, this rank %d and %d (another config?)",
			o.Index, o.Asked[0], o.Asked[1], mine.Asked[0], mine.Asked[1])
	case o.Exported[0] < o.Asked[0] || o.Exported[1] < o.Asked[1]:
		err = fmt.Errorf("node rank %d exports %d and %d bytes for buffers of %d and %d", o.Index,
			o.Exported[0], o.Exported[1], o.Asked[0], o.Asked[1])
	}
	if err != nil {
		_, _ = c.Write([]byte{AckRefused})
		return fmt.Errorf("%w: %w", err, a2a.ErrInvalidArgument)
	}
	var p mapped[M]
	for i := range p.buf {
		if p.buf[i], err = m.imp.Import(fds[i], int(o.Exported[i])); err != nil {
			if i == 1 {
				_ = m.imp.Release(p.buf[0])
			}
			_, _ = c.Write([]byte{AckRefused})
			return fmt.Errorf("import node rank %d's buffer %d: %w", o.Index, i, err)
		}
	}
	p.ok = true
	got[o.Index] = p
	if _, err := c.Write([]byte{AckMapped}); err != nil {
		return fmt.Errorf("confirm to node rank %d: %w", o.Index, errors.Join(err, ctx.Err()))
	}
	return nil
}

// offerTo sends our offer to the socket name and waits for the answer.
func (m *Member[M]) offerTo(ctx context.Context, name string, mine Offer) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unixpacket", name)
	if err != nil {
		return err
	}
	c := conn.(*net.UnixConn)
	defer c.Close()
	if err := shm.Send(ctx, c, mine.Encode(), m.fds[0], m.fds[1]); err != nil {
		return fmt.Errorf("send offer: %w", err)
	}
	ack := make([]byte, 1)
	if k, _, err := shm.Receive(ctx, c, ack, 0); err != nil || k != 1 {
		return fmt.Errorf("no answer to the offer: %w", errors.Join(err, ctx.Err()))
	}
	if ack[0] != AckMapped {
		return fmt.Errorf("offer refused (see that rank's error): %w", a2a.ErrInvalidArgument)
	}
	return nil
}

// Close releases the peers' mappings and closes this member's files and
// socket. The buffers themselves live on while any process maps them.
// Idempotent.
func (m *Member[M]) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	for i, p := range m.peers {
		errs = append(errs, m.release(p))
		m.peers[i] = mapped[M]{}
	}
	if m.ln != nil {
		_ = m.ln.Close()
		m.ln = nil
	}
	for _, fd := range slices.Backward(m.fds[:]) {
		if fd >= 0 {
			errs = append(errs, unix.Close(fd))
		}
	}
	m.fds = [2]int{-1, -1}
	return errors.Join(errs...)
}

func (m *Member[M]) offer() Offer {
	return Offer{Index: uint32(m.spec.Index), Size: uint32(m.spec.Size), Rank: uint32(m.spec.Rank),
		Asked: m.spec.Asked, Exported: m.spec.Exported}
}

// Answers to an offer.
const (
	AckRefused = 0
	AckMapped  = 1
)

// Offer is what a member tells a node peer beside its two descriptors.
type Offer struct {
	Index, Size, Rank uint32    // node-local rank, node size, world rank
	Asked             [2]uint64 // the send and receive sizes the backend asked for
	Exported          [2]uint64 // the files' sizes (what an importer maps)
}

const (
	offerMagic   = 0x444f4e46 // "FNOD"
	offerVersion = 1
	offerSize    = 4 + 4 + 3*4 + 4*8
)

// Encode returns the offer's wire form.
func (o Offer) Encode() []byte {
	b := make([]byte, 0, offerSize)
	b = binary.LittleEndian.AppendUint32(b, offerMagic)
	b = binary.LittleEndian.AppendUint32(b, offerVersion)
	for _, v := range []uint32{o.Index, o.Size, o.Rank} {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	for _, v := range []uint64{o.Asked[0], o.Asked[1], o.Exported[0], o.Exported[1]} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

func decodeOffer(b []byte) (Offer, error) {
	if len(b) != offerSize || binary.LittleEndian.Uint32(b) != offerMagic || binary.LittleEndian.Uint32(b[4:]) != offerVersion {
		return Offer{}, fmt.Errorf("malformed offer (%d bytes)", len(b))
	}
	u32 := func(i int) uint32 { return binary.LittleEndian.Uint32(b[8+4*i:]) }
	u64 := func(i int) uint64 { return binary.LittleEndian.Uint64(b[20+8*i:]) }
	return Offer{Index: u32(0), Size: u32(1), Rank: u32(2), Asked: [2]uint64{u64(0), u64(1)},
		Exported: [2]uint64{u64(2), u64(3)}}, nil
}
