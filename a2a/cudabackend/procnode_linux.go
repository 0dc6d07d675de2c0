package cudabackend

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/a2a"
)

// ProcessNode shares the transport buffers of an NVLink domain whose ranks
// are separate processes of one machine: every rank allocates its send and
// receive buffers as exportable memory of its device (CUDA VMM with POSIX
// file descriptor handles on a GPU, sealed memfds on the emulator) and
// offers the two descriptors to each node peer over a unix socket
// (SCM_RIGHTS); the peer imports and maps them for its own device and
// answers once it has. Share returns when this rank mapped every peer's
// buffers and every peer confirmed it mapped this rank's.
//
// Sockets live in the abstract namespace under random names, so nothing
// is left in the file system, and the descriptors in flight die with the
// socket when a process does. Every rank of the world must use a
// ProcessNode made with the world's Config (Share all-gathers the socket
// names over the whole world). Share and Close are called from one
// goroutine; Close releases the peers' mappings, then this rank's memory.
type ProcessNode struct {
	l       a2a.Layout
	ex      Exchanger
	dev     ExportingDevice
	own     []ExportableMemory // send, receive
	imports []Memory           // node peers' buffers, mapped here
	shared  bool
	closed  bool
}

var _ NodeMemory = (*ProcessNode)(nil)

// NewProcessNode returns rank cfg.Rank's member of its domain, allocating
// on dev.
func NewProcessNode(cfg a2a.Config, ex Exchanger, dev ExportingDevice) (*ProcessNode, error) {
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	if ex == nil || dev == nil {
		return nil, fmt.Errorf("a2a cuda process node: exchanger and device are required: %w", a2a.ErrInvalidArgument)
	}
	return &ProcessNode{l: l, ex: ex, dev: dev}, nil
}

// Buffers returns this rank's own send and receive memory once shared.
func (n *ProcessNode) Buffers() (send, recv Memory) {
	if len(n.own) < 2 {
		return nil, nil
	}
	return n.own[0], n.own[1]
}

// shareTimeout bounds Share when its context has no deadline.
const shareTimeout = time.Minute

// Share allocates this rank's buffers and exchanges them with the node
// peers. A peer that does not show up by ctx's deadline (a minute without
// one) makes it fail with an error wrapping a2a.ErrTimeout that names the
// missing node ranks; a malformed or mismatched offer (another config)
// wraps a2a.ErrInvalidArgument. On error everything is released.
func (n *ProcessNode) Share(ctx context.Context, sendBytes, recvBytes int) (send, recv []uint64, err error) {
	if n.shared || n.closed || sendBytes <= 0 || recvBytes <= 0 {
		return nil, nil, fmt.Errorf("a2a cuda process node: share twice, after close, or of %d and %d bytes: %w",
			sendBytes, recvBytes, a2a.ErrInvalidArgument)
	}
	n.shared = true
	defer func() {
		if err != nil {
			_ = n.Close()
		}
	}()
	S := n.l.NVLinkSize
	me := n.l.Rank - n.l.Node(n.l.Rank)*S
	for _, size := range []int{sendBytes, recvBytes} {
		m, err := n.dev.AllocExportable(size)
		if err != nil {
			return nil, nil, fmt.Errorf("a2a cuda process node: allocate %d bytes: %w", size, err)
		}
		n.own = append(n.own, m)
	}
	send, recv = make([]uint64, S), make([]uint64, S)
	send[me], recv[me] = n.own[0].Addr(), n.own[1].Addr()
	if S == 1 {
		return send, recv, nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, shareTimeout)
		defer cancel()
	}
	want := offer{index: uint32(me), size: uint32(S), rank: uint32(n.l.Rank), sendBytes: uint64(sendBytes),
		recvBytes: uint64(recvBytes), sendSize: uint64(n.own[0].Size()), recvSize: uint64(n.own[1].Size())}
	peers, err := n.exchange(ctx, want)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", a2a.ErrTimeout, err)
		}
		return nil, nil, err
	}
	for i, p := range peers {
		if i != me {
			send[i], recv[i] = p[0].Addr(), p[1].Addr()
		}
	}
	return send, recv, nil
}

// exchange runs the socket protocol: listen, all-gather the names, offer
// our buffers to every node peer while admitting theirs. It returns the
// peers' mapped buffers by node-local index (nil at ours).
func (n *ProcessNode) exchange(ctx context.Context, mine offer) ([][2]Memory, error) {
	S, me := int(mine.size), int(mine.index)
	base := n.l.Rank - me
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, err
	}
	name := "@ferry-a2a-node-" + hex.EncodeToString(nonce[:])
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: name, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("a2a cuda process node: listen: %w", err)
	}
	defer ln.Close()
	names, err := n.ex.AllGather(ctx, []byte(name))
	if err != nil {
		return nil, fmt.Errorf("a2a cuda process node: exchange socket names: %w", err)
	}
	if len(names) != n.l.WorldSize {
		return nil, fmt.Errorf("a2a cuda process node: %d names for %d ranks: %w", len(names), n.l.WorldSize, a2a.ErrInvalidArgument)
	}
	fds := [2]int{-1, -1}
	defer func() {
		for _, fd := range fds {
			if fd >= 0 {
				_ = unix.Close(fd)
			}
		}
	}()
	for i, m := range n.own {
		if fds[i], err = m.Export(); err != nil {
			return nil, fmt.Errorf("a2a cuda process node: export: %w", err)
		}
	}

	// The admitter maps what peers offer while this goroutine offers ours.
	// The first failure cancels the other side (closing every socket in
	// use) and is the one reported.
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
	peers := make([][2]Memory, S)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := n.admitAll(actx, ln, mine, peers); err != nil {
			fail(err)
		}
	}()
	for i := 0; i < S && actx.Err() == nil; i++ {
		if i == me {
			continue
		}
		if err := offerTo(actx, string(names[base+i]), mine, fds); err != nil {
			fail(fmt.Errorf("a2a cuda process node: rank %d to node rank %d: %w", n.l.Rank, i, err))
		}
	}
	wg.Wait()
	// Whatever was mapped is ours to release now, on every path.
	for _, p := range peers {
		for _, m := range p {
			if m != nil {
				n.imports = append(n.imports, m)
			}
		}
	}
	if first != nil {
		return nil, first
	}
	return peers, nil
}

// admitAll accepts one offer from every other node rank, maps it into
// peers[index] and confirms it.
func (n *ProcessNode) admitAll(ctx context.Context, ln *net.UnixListener, mine offer, peers [][2]Memory) error {
	for got := 1; got < len(peers); got++ {
		c, err := ln.AcceptUnix()
		if err != nil {
			var missing []string
			for i, p := range peers {
				if p[0] == nil && i != int(mine.index) {
					missing = append(missing, strconv.Itoa(i))
				}
			}
			return fmt.Errorf("a2a cuda process node: rank %d: no offer from node rank %s: %w", n.l.Rank,
				strings.Join(missing, ", "), err)
		}
		err = n.admit(ctx, c, mine, peers)
		c.Close()
		if err != nil {
			return fmt.Errorf("a2a cuda process node: rank %d: %w", n.l.Rank, err)
		}
	}
	return nil
}

// admit reads one offer on c, checks it against ours, imports its two
// buffers and answers. Received descriptors are closed on every path.
func (n *ProcessNode) admit(ctx context.Context, c *net.UnixConn, mine offer, peers [][2]Memory) error {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	buf := make([]byte, offerSize+1)
	oob := make([]byte, unix.CmsgSpace(4*4)) // room to see a sender that passes too many
	nb, noob, flags, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return fmt.Errorf("read offer: %w", err)
	}
	fds, perr := parseFDs(oob[:noob])
	defer func() {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
	}()
	o, derr := decodeOffer(buf[:nb])
	switch {
	case perr != nil || flags&unix.MSG_CTRUNC != 0 || len(fds) != 2:
		err = fmt.Errorf("offer with %d descriptors (flags %#x, %v), want 2", len(fds), flags, perr)
	case derr != nil:
		err = derr
	case o.size != mine.size || int(o.index) >= len(peers) || o.index == mine.index ||
		int(o.rank) != n.l.Rank-int(mine.index)+int(o.index):
		err = fmt.Errorf("offer from node rank %d of %d (world rank %d) does not fit node rank %d of %d",
			o.index, o.size, o.rank, mine.index, mine.size)
	case peers[o.index][0] != nil:
		err = fmt.Errorf("second offer from node rank %d", o.index)
	case o.sendBytes != mine.sendBytes || o.recvBytes != mine.recvBytes:
		err = fmt.Errorf("node rank %d has buffers of %d and %d bytes, this rank %d and %d (another config?)",
			o.index, o.sendBytes, o.recvBytes, mine.sendBytes, mine.recvBytes)
	case o.sendSize < o.sendBytes || o.recvSize < o.recvBytes:
		err = fmt.Errorf("node rank %d exports %d and %d bytes for buffers of %d and %d", o.index, o.sendSize,
			o.recvSize, o.sendBytes, o.recvBytes)
	}
	if err != nil {
		_, _ = c.Write([]byte{ackRefused})
		return fmt.Errorf("%w: %w", err, a2a.ErrInvalidArgument)
	}
	s, err := n.dev.Import(fds[0], int(o.sendSize))
	if err != nil {
		_, _ = c.Write([]byte{ackRefused})
		return fmt.Errorf("import node rank %d's send buffer: %w", o.index, err)
	}
	r, err := n.dev.Import(fds[1], int(o.recvSize))
	if err != nil {
		_ = s.Free()
		_, _ = c.Write([]byte{ackRefused})
		return fmt.Errorf("import node rank %d's receive buffer: %w", o.index, err)
	}
	peers[o.index] = [2]Memory{s, r}
	if _, err := c.Write([]byte{ackMapped}); err != nil {
		return fmt.Errorf("confirm to node rank %d: %w", o.index, err)
	}
	return nil
}

// offerTo sends our offer to the socket name and waits for the answer.
func offerTo(ctx context.Context, name string, mine offer, fds [2]int) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unixpacket", name)
	if err != nil {
		return err
	}
	c := conn.(*net.UnixConn)
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if _, _, err := c.WriteMsgUnix(mine.encode(), unix.UnixRights(fds[0], fds[1]), nil); err != nil {
		return fmt.Errorf("send offer: %w", err)
	}
	ack := make([]byte, 1)
	if k, err := c.Read(ack); err != nil || k != 1 {
		return fmt.Errorf("no answer to the offer: %w", errors.Join(err, ctx.Err()))
	}
	if ack[0] != ackMapped {
		return fmt.Errorf("offer refused (see that rank's error): %w", a2a.ErrInvalidArgument)
	}
	return nil
}

func parseFDs(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for i := range msgs {
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			return fds, err
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

// Answers to an offer.
const (
	ackRefused = 0
	ackMapped  = 1
)

// offer is what a rank tells a node peer beside its two descriptors.
type offer struct {
	index, size, rank    uint32 // node-local index, node size, world rank
	sendBytes, recvBytes uint64 // the sizes the backend asked for
	sendSize, recvSize   uint64 // the exported sizes (an importer maps these)
}

const (
	offerMagic   = 0x444f4e46 // "FNOD"
	offerVersion = 1
	offerSize    = 4 + 4 + 3*4 + 4*8
)

func (o offer) encode() []byte {
	b := make([]byte, 0, offerSize)
	b = binary.LittleEndian.AppendUint32(b, offerMagic)
	b = binary.LittleEndian.AppendUint32(b, offerVersion)
	for _, v := range []uint32{o.index, o.size, o.rank} {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	for _, v := range []uint64{o.sendBytes, o.recvBytes, o.sendSize, o.recvSize} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

func decodeOffer(b []byte) (offer, error) {
	if len(b) != offerSize || binary.LittleEndian.Uint32(b) != offerMagic || binary.LittleEndian.Uint32(b[4:]) != offerVersion {
		return offer{}, fmt.Errorf("malformed offer (%d bytes)", len(b))
	}
	u32 := func(i int) uint32 { return binary.LittleEndian.Uint32(b[8+4*i:]) }
	u64 := func(i int) uint64 { return binary.LittleEndian.Uint64(b[20+8*i:]) }
	return offer{index: u32(0), size: u32(1), rank: u32(2), sendBytes: u64(0), recvBytes: u64(1), sendSize: u64(2),
		recvSize: u64(3)}, nil
}

// Close releases the node peers' mappings, then this rank's buffers. The
// memory itself lives on while any process still maps it. Idempotent.
func (n *ProcessNode) Close() error {
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	for _, m := range n.imports {
		errs = append(errs, m.Free())
	}
	for _, m := range slices.Backward(n.own) {
		errs = append(errs, m.Free())
	}
	n.imports, n.own = nil, nil
	return errors.Join(errs...)
}
