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
type ProcessNode struct {
	l    a2a.Layout
	ex   Exchanger
	own  []*fabric.HostBuffer // this rank's buffers: shareable by the engine too (ipc)
	maps [][]byte             // node peers' buffers
	done bool
}

var _ NodeMemory = (*ProcessNode)(nil)

// NewProcessNode returns rank cfg.Rank's member of its domain.
func NewProcessNode(cfg a2a.Config, ex Exchanger) (*ProcessNode, error) {
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	if ex == nil {
		return nil, fmt.Errorf("process node: nil exchanger: %w", a2a.ErrInvalidArgument)
	}
	return &ProcessNode{l: l, ex: ex}, nil
}

// msgSize is a peer's hello: node-local index, send and receive sizes.
const msgSize = 4 + 8 + 8

func (n *ProcessNode) Share(ctx context.Context, sendBytes, recvBytes int) (send, recv [][]byte, err error) {
	if n.done {
		return nil, nil, fmt.Errorf("process node: share twice: %w", a2a.ErrInvalidArgument)
	}
	n.done = true
	defer func() {
		if err != nil {
			_ = n.Close()
		}
	}()
	S := n.l.NVLinkSize
	base := n.l.Node(n.l.Rank) * S
	me := n.l.Rank - base
	send, recv = make([][]byte, S), make([][]byte, S)

	fds := [2]int{-1, -1}
	defer func() {
		for _, fd := range fds {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}()
	for i, size := range []int{sendBytes, recvBytes} {
		if fds[i], err = unix.MemfdCreate(fmt.Sprintf("ferry-a2a-%d-%d", n.l.Rank, i), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING); err != nil {
			return nil, nil, fmt.Errorf("process node: memfd_create: %w", err)
		}
		if err = unix.Ftruncate(fds[i], int64(size)); err != nil {
			return nil, nil, fmt.Errorf("process node: ftruncate %d: %w", size, err)
		}
		// Sealed, so no process holding the file can shrink it under
		// another's mapping; mapped through fabric, so the engine's ipc
		// transport can share the receive buffer with ranks of other nodes
		// of this host.
		if _, err = unix.FcntlInt(uintptr(fds[i]), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
			return nil, nil, fmt.Errorf("process node: seal: %w", err)
		}
		hb, err := fabric.MapHostFile(fds[i], size)
		if err != nil {
			return nil, nil, fmt.Errorf("process node: %w", err)
		}
		n.own = append(n.own, hb)
		m := hb.Bytes()
		if i == 0 {
			send[me] = m
		} else {
			recv[me] = m
		}
	}

	var name [16]byte
	if _, err := rand.Read(name[:]); err != nil {
		return nil, nil, err
	}
	addr := "@ferry-a2a-" + hex.EncodeToString(name[:])
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		return nil, nil, fmt.Errorf("process node: listen %s: %w", addr, err)
	}
	defer ln.Close()
	names, err := n.ex.AllGather(ctx, []byte(addr))
	if err != nil {
		return nil, nil, fmt.Errorf("process node: exchange socket names: %w", err)
	}
	if len(names) != n.l.WorldSize {
		return nil, nil, fmt.Errorf("process node: %d names for %d ranks: %w", len(names), n.l.WorldSize, a2a.ErrInvalidArgument)
	}
	deadline, _ := ctx.Deadline()
	if deadline.IsZero() {
		deadline = time.Now().Add(time.Minute)
	}
	_ = ln.SetDeadline(deadline)

	// Accept S-1 hellos while sending ours to every peer.
	type got struct {
		idx        int
		send, recv []byte
		err        error
	}
	results := make(chan got, S)
	acceptDone := make(chan struct{})
	// The acceptor maps peers' buffers (appending to n.maps), so Share
	// waits for it to finish before returning on every path.
	defer func() { ln.Close(); <-acceptDone }()
	go func() {
		defer close(acceptDone)
		for range S - 1 {
			c, err := ln.AcceptUnix()
			if err != nil {
				results <- got{err: err}
				return
			}
			g := got{}
			g.idx, g.send, g.recv, g.err = n.receive(c, deadline, sendBytes, recvBytes)
			c.Close()
			results <- g
		}
	}()
	hello := make([]byte, msgSize)
	binary.LittleEndian.PutUint32(hello, uint32(me))
	binary.LittleEndian.PutUint64(hello[4:], uint64(sendBytes))
	binary.LittleEndian.PutUint64(hello[12:], uint64(recvBytes))
	var sendErr error
	for i := range S {
		if i == me {
			continue
		}
		if err := sendHello(string(names[base+i]), deadline, hello, fds); err != nil {
			sendErr = fmt.Errorf("process node: hello to node rank %d: %w", i, err)
			break
		}
	}
	var errs []error
	if sendErr != nil {
		errs = append(errs, sendErr)
		ln.Close() // unblocks the acceptor
		<-acceptDone
		close(results)
	}
	for range S - 1 {
		g, ok := <-results
		if !ok {
			break
		}
		if g.err != nil {
			errs = append(errs, g.err)
			break
		}
		if g.idx < 0 || g.idx >= S || g.idx == me || send[g.idx] != nil {
			errs = append(errs, fmt.Errorf("process node: hello from bad node rank %d: %w", g.idx, a2a.ErrInvalidArgument))
			break
		}
		send[g.idx], recv[g.idx] = g.send, g.recv
	}
	if err := errors.Join(errs...); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", a2a.ErrTimeout, err)
		}
		return nil, nil, err
	}
	return send, recv, nil
}

func (n *ProcessNode) mmap(fd, size int) ([]byte, error) {
	m, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("process node: mmap %d bytes: %w", size, err)
	}
	n.maps = append(n.maps, m)
	return m, nil
}

func sendHello(addr string, deadline time.Time, hello []byte, fds [2]int) error {
	d := net.Dialer{Deadline: deadline}
	c, err := d.Dial("unix", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_, _, err = c.(*net.UnixConn).WriteMsgUnix(hello, unix.UnixRights(fds[0], fds[1]), nil)
	return err
}

// receive reads one hello and maps the two buffers it carries.
func (n *ProcessNode) receive(c *net.UnixConn, deadline time.Time, sendBytes, recvBytes int) (int, []byte, []byte, error) {
	_ = c.SetDeadline(deadline)
	buf := make([]byte, msgSize)
	oob := make([]byte, unix.CmsgSpace(2*4))
	nb, noob, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return -1, nil, nil, err
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
		return -1, nil, nil, fmt.Errorf("process node: malformed hello (%d bytes, %d fds, %v): %w", nb, len(fds), err, a2a.ErrInvalidArgument)
	}
	idx := int(binary.LittleEndian.Uint32(buf))
	if int(binary.LittleEndian.Uint64(buf[4:])) != sendBytes || int(binary.LittleEndian.Uint64(buf[12:])) != recvBytes {
		return -1, nil, nil, fmt.Errorf("process node: peer %d has other buffer sizes (a different config?): %w", idx, a2a.ErrInvalidArgument)
	}
	s, err := n.mmap(fds[0], sendBytes)
	if err != nil {
		return -1, nil, nil, err
	}
	r, err := n.mmap(fds[1], recvBytes)
	if err != nil {
		return -1, nil, nil, err
	}
	return idx, s, r, nil
}

// Close unmaps every buffer this process mapped. The memory itself goes
// away with the last process that maps it.
func (n *ProcessNode) Close() error {
	var errs []error
	for _, m := range n.maps {
		errs = append(errs, unix.Munmap(m))
	}
	for _, b := range n.own {
		errs = append(errs, b.Free())
	}
	n.maps, n.own = nil, nil
	return errors.Join(errs...)
}
