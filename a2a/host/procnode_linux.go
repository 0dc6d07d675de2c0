package host

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/fabric"
)

// ProcessNode shares transport buffers between the processes of one
// domain on one machine: each rank maps its buffers from two memfds and
// hands the descriptors to its node peers over an abstract unix socket
// (SCM_RIGHTS), the way CUDA VMM handles travel between GPU processes.
// Abstract sockets and memfds leave nothing in the file system, so a
// crashed job leaks no /dev/shm files. Linux only.
//
// Every rank of the world must use a ProcessNode (Share all-gathers the
// socket names over the whole world), created with the world's Config.
// It keeps its two memfds open, so that a restarted node peer can map
// them (NodeRejoiner): at a reshare each member listens on a fresh
// socket, whose name travels in the membership's exchange, and unmaps
// what it mapped of a dead incarnation.
type ProcessNode struct {
	l          a2a.Layout
	ex         Exchanger
	own        []*fabric.HostBuffer // this rank's buffers: shareable by the engine too (ipc)
	fds        [2]int               // their memfds, handed to node peers
	peers      [][2][]byte          // by node-local rank: the peer's send and receive buffers as mapped here
	sendBytes  int
	recvBytes  int
	offer      *net.UnixListener // the socket of the last Offer, until Reshare
	used, done bool
}

var _ NodeRejoiner = (*ProcessNode)(nil)

// NewProcessNode returns rank cfg.Rank's member of its domain. ex reaches
// the whole world, for Share; a rank built to join calls Alloc instead
// and may pass nil.
func NewProcessNode(cfg a2a.Config, ex Exchanger) (*ProcessNode, error) {
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	return &ProcessNode{l: l, ex: ex, fds: [2]int{-1, -1}, peers: make([][2][]byte, l.NVLinkSize)}, nil
}

// msgSize is a peer's hello: node-local index, send and receive sizes.
const msgSize = 4 + 8 + 8

func (n *ProcessNode) base() int { return n.l.Node(n.l.Rank) * n.l.NVLinkSize }
func (n *ProcessNode) me() int   { return n.l.Rank - n.base() }

// alloc makes and maps this rank's two memfds.
func (n *ProcessNode) alloc(sendBytes, recvBytes int) error {
	if n.used {
		return fmt.Errorf("process node: share twice: %w", a2a.ErrInvalidArgument)
	}
	n.used = true
	n.sendBytes, n.recvBytes = sendBytes, recvBytes
	for i, size := range []int{sendBytes, recvBytes} {
		fd, err := unix.MemfdCreate(fmt.Sprintf("ferry-a2a-%d-%d", n.l.Rank, i), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			return fmt.Errorf("process node: memfd_create: %w", err)
		}
		n.fds[i] = fd
		if err = unix.Ftruncate(fd, int64(size)); err != nil {
			return fmt.Errorf("process node: ftruncate %d: %w", size, err)
		}
		// Sealed, so no process holding the file can shrink it under
		// another's mapping; mapped through fabric, so the engine's ipc
		// transport can share the receive buffer with ranks of other nodes
		// of this host.
		if _, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
			return fmt.Errorf("process node: seal: %w", err)
		}
		hb, err := fabric.MapHostFile(fd, size)
		if err != nil {
			return fmt.Errorf("process node: %w", err)
		}
		n.own = append(n.own, hb)
	}
	return nil
}

// views returns every buffer by node-local rank (nil for a peer not mapped).
func (n *ProcessNode) views() (send, recv [][]byte) {
	S := n.l.NVLinkSize
	send, recv = make([][]byte, S), make([][]byte, S)
	for i, p := range n.peers {
		send[i], recv[i] = p[0], p[1]
	}
	send[n.me()], recv[n.me()] = n.own[0].Bytes(), n.own[1].Bytes()
	return send, recv
}

// listen opens an abstract unix socket of a random name.
func listen() (*net.UnixListener, string, error) {
	var name [16]byte
	if _, err := rand.Read(name[:]); err != nil {
		return nil, "", err
	}
	addr := "@ferry-a2a-" + hex.EncodeToString(name[:])
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, "", fmt.Errorf("process node: listen %s: %w", addr, err)
	}
	return ln, addr, nil
}

func (n *ProcessNode) Share(ctx context.Context, sendBytes, recvBytes int) (send, recv [][]byte, err error) {
	if n.ex == nil {
		return nil, nil, fmt.Errorf("process node: share needs an exchanger: %w", a2a.ErrInvalidArgument)
	}
	defer func() {
		if err != nil {
			_ = n.Close()
		}
	}()
	if err := n.alloc(sendBytes, recvBytes); err != nil {
		return nil, nil, err
	}
	ln, addr, err := listen()
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	names, err := n.ex.AllGather(ctx, []byte(addr))
	if err != nil {
		return nil, nil, fmt.Errorf("process node: exchange socket names: %w", err)
	}
	if len(names) != n.l.WorldSize {
		return nil, nil, fmt.Errorf("process node: %d names for %d ranks: %w", len(names), n.l.WorldSize, a2a.ErrInvalidArgument)
	}
	addrs := make([]string, n.l.NVLinkSize)
	for i := range addrs {
		addrs[i] = string(names[n.base()+i])
	}
	if err := n.swap(ctx, ln, addrs); err != nil {
		return nil, nil, err
	}
	send, recv = n.views()
	return send, recv, nil
}

// Alloc makes this rank's buffers alone, for a backend built to join.
func (n *ProcessNode) Alloc(sendBytes, recvBytes int) (send, recv [][]byte, err error) {
	if err := n.alloc(sendBytes, recvBytes); err != nil {
		_ = n.Close()
		return nil, nil, err
	}
	send, recv = n.views()
	return send, recv, nil
}

// Offer listens on a fresh socket and returns its name.
func (n *ProcessNode) Offer(uint32) ([]byte, error) {
	if n.own == nil || n.done {
		return nil, fmt.Errorf("process node: offer without buffers: %w", a2a.ErrInvalidArgument)
	}
	if n.offer != nil {
		n.offer.Close()
	}
	ln, addr, err := listen()
	if err != nil {
		return nil, err
	}
	n.offer = ln
	return []byte(addr), nil
}

func (n *ProcessNode) Reshare(ctx context.Context, _ uint32, offers [][]byte) (send, recv [][]byte, err error) {
	ln := n.offer
	n.offer = nil
	if ln != nil {
		defer ln.Close()
	}
	if offers == nil {
		return nil, nil, nil
	}
	if ln == nil || len(offers) != n.l.NVLinkSize || offers[n.me()] == nil {
		return nil, nil, fmt.Errorf("process node: reshare without an offer: %w", a2a.ErrInvalidArgument)
	}
	addrs := make([]string, len(offers))
	for i, o := range offers {
		if o != nil {
			addrs[i] = string(o)
		}
	}
	if err := n.swap(ctx, ln, addrs); err != nil {
		return nil, nil, err
	}
	send, recv = n.views()
	return send, recv, nil
}

// hello is what one peer's connection brought: its node-local rank and
// its buffers, mapped.
type hello struct {
	idx int
	buf [2][]byte
	err error
}

// swap hands this rank's memfds to every peer named in addrs (by
// node-local rank; "" for none) and maps as many peers' buffers, accepted
// on ln, in place of what was mapped for them; peers not named are
// unmapped. It ends with ctx: on failure nothing changed.
func (n *ProcessNode) swap(ctx context.Context, ln *net.UnixListener, addrs []string) error {
	me := n.me()
	want := 0
	for i, a := range addrs {
		if a != "" && i != me {
			want++
		}
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	_ = ln.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	results := make(chan hello, want)
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for range want {
			c, err := ln.AcceptUnix()
			if err != nil {
				results <- hello{idx: -1, err: err}
				return
			}
			h := n.receive(c, deadline)
			c.Close()
			results <- h
			if h.err != nil {
				return
			}
		}
	}()
	msg := make([]byte, msgSize)
	binary.LittleEndian.PutUint32(msg, uint32(me))
	binary.LittleEndian.PutUint64(msg[4:], uint64(n.sendBytes))
	binary.LittleEndian.PutUint64(msg[12:], uint64(n.recvBytes))
	var errs []error
	for i, a := range addrs {
		if i == me || a == "" {
			continue
		}
		if err := sendHello(ctx, a, deadline, msg, n.fds); err != nil {
			errs = append(errs, fmt.Errorf("process node: hello to rank %d: %w", n.base()+i, err))
			ln.Close() // unblocks the acceptor
			break
		}
	}
	<-acceptDone
	close(results)
	got := make([][2][]byte, len(addrs))
	for h := range results {
		switch {
		case h.err != nil:
			errs = append(errs, h.err)
		case h.idx < 0 || h.idx >= len(addrs) || addrs[h.idx] == "" || h.idx == me || got[h.idx][0] != nil:
			errs = append(errs, fmt.Errorf("process node: hello from unexpected node rank %d: %w", h.idx, a2a.ErrInvalidArgument))
			unmap(h.buf)
		default:
			got[h.idx] = h.buf
		}
	}
	var missing []int
	for i, a := range addrs {
		if a != "" && i != me && got[i][0] == nil {
			missing = append(missing, n.base()+i)
		}
	}
	if len(missing) > 0 {
		errs = append(errs, fmt.Errorf("process node: ranks %v did not come", missing))
	}
	if err := errors.Join(errs...); err != nil {
		for _, b := range got {
			unmap(b)
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			err = fmt.Errorf("%w: %w", a2a.ErrTimeout, err)
		}
		return err
	}
	for i := range n.peers {
		if i == me {
			continue
		}
		if err := unmap(n.peers[i]); err != nil {
			errs = append(errs, err)
		}
		n.peers[i] = got[i]
	}
	return errors.Join(errs...)
}

// unmap releases a peer's two mappings (nil ones are skipped).
func unmap(b [2][]byte) error {
	var errs []error
	for _, m := range b {
		if m != nil {
			errs = append(errs, unix.Munmap(m))
		}
	}
	return errors.Join(errs...)
}

func sendHello(ctx context.Context, addr string, deadline time.Time, msg []byte, fds [2]int) error {
	d := net.Dialer{Deadline: deadline}
	c, err := d.DialContext(ctx, "unix", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_, _, err = c.(*net.UnixConn).WriteMsgUnix(msg, unix.UnixRights(fds[0], fds[1]), nil)
	return err
}

// receive reads one hello and maps the two buffers it carries.
func (n *ProcessNode) receive(c *net.UnixConn, deadline time.Time) hello {
	_ = c.SetDeadline(deadline)
	buf := make([]byte, msgSize)
	oob := make([]byte, unix.CmsgSpace(2*4))
	nb, noob, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return hello{idx: -1, err: err}
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:noob])
	var fds []int
	if err == nil && len(msgs) == 1 {
		fds, err = unix.ParseUnixRights(&msgs[0])
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if err != nil || len(fds) != 2 || nb != msgSize {
		return hello{idx: -1, err: fmt.Errorf("process node: malformed hello (%d bytes, %d fds, %v): %w", nb, len(fds), err, a2a.ErrInvalidArgument)}
	}
	idx := int(binary.LittleEndian.Uint32(buf))
	if int(binary.LittleEndian.Uint64(buf[4:])) != n.sendBytes || int(binary.LittleEndian.Uint64(buf[12:])) != n.recvBytes {
		return hello{idx: -1, err: fmt.Errorf("process node: peer %d has other buffer sizes (a different config?): %w", idx, a2a.ErrInvalidArgument)}
	}
	h := hello{idx: idx}
	for i, size := range []int{n.sendBytes, n.recvBytes} {
		m, err := unix.Mmap(fds[i], 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			unmap(h.buf)
			return hello{idx: -1, err: fmt.Errorf("process node: mmap %d bytes: %w", size, err)}
		}
		h.buf[i] = m
	}
	return h
}

// Close unmaps every buffer this process mapped and closes its memfds.
// The memory itself goes away with the last process that maps it.
func (n *ProcessNode) Close() error {
	if n.done {
		return nil
	}
	n.done = true
	var errs []error
	for i := range n.peers {
		errs = append(errs, unmap(n.peers[i]))
		n.peers[i] = [2][]byte{}
	}
	for _, b := range n.own {
		errs = append(errs, b.Free())
	}
	for i, fd := range n.fds {
		if fd >= 0 {
			errs = append(errs, unix.Close(fd))
			n.fds[i] = -1
		}
	}
	if n.offer != nil {
		n.offer.Close()
		n.offer = nil
	}
	n.own = nil
	return errors.Join(errs...)
}
