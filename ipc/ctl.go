package ipc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/internal/shm"
)

// The control protocol runs over one SOCK_SEQPACKET unix connection per
// (initiator domain, target domain) pair, dialled by the initiator. Every
// packet is one fixed-size message; files travel beside it as SCM_RIGHTS.
// Bytes never cross the socket: they move through shared mappings.
//
//	initiator                          target
//	hello{pid}                    ->
//	                              <-   helloAck{page sizes} + connection page memfd, wake eventfd
//	mapReq{seq, key}              ->
//	                              <-   mapAck{seq, key, status, file offset, lengths} + region memfd
//	                              <-   revoke{seq, key}          (the target unregistered key)
//	revokeAck{seq}                ->   (the mapping is unmapped and no copy into it runs)
//	                              <-   bye                       (the target closes its domain)
//
// When either process exits, the kernel closes its end and the other side
// reads EOF: that is how a dead peer is detected, at once, without
// heartbeats.
const (
	ctlHello uint32 = 1 + iota
	ctlHelloAck
	ctlMapReq
	ctlMapAck
	ctlRevoke
	ctlRevokeAck
	ctlBye
)

const (
	ctlLen     = 56
	ctlVersion = 3 // 3: mapAck status carries ackReadable
)

// ctlTimeoutNs bounds a blocking control write and the wait for revoke
// acknowledgements from a live but unresponsive peer: 5 s (atomic so tests
// can shorten it while control goroutines run).
var ctlTimeoutNs atomic.Int64

func init() { ctlTimeoutNs.Store(int64(5 * time.Second)) }

func ctlTimeout() time.Duration { return time.Duration(ctlTimeoutNs.Load()) }

// ackReadable is set in a successful mapAck's status when the region may
// be read (rdma.AccessRemoteRead); the rest of status is a refusal's errno.
const ackReadable = 1 << 31

type ctlMsg struct {
	kind   uint32
	status uint32 // 0, or the errno of a refused request
	seq    uint64
	key    uint64
	a, b   uint64 // per kind: hello: version, pid; mapAck: file offset, mapping length
	c, d   uint64 // mapAck: region offset in the mapping, region length
}

func (m *ctlMsg) encode(b *[ctlLen]byte) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], m.kind)
	le.PutUint32(b[4:], m.status)
	le.PutUint64(b[8:], m.seq)
	le.PutUint64(b[16:], m.key)
	le.PutUint64(b[24:], m.a)
	le.PutUint64(b[32:], m.b)
	le.PutUint64(b[40:], m.c)
	le.PutUint64(b[48:], m.d)
}

func (m *ctlMsg) decode(b []byte) {
	le := binary.LittleEndian
	*m = ctlMsg{kind: le.Uint32(b[0:]), status: le.Uint32(b[4:]), seq: le.Uint64(b[8:]), key: le.Uint64(b[16:]),
		a: le.Uint64(b[24:]), b: le.Uint64(b[32:]), c: le.Uint64(b[40:]), d: le.Uint64(b[48:])}
}

// ctlConn is one control connection. send and recv may run in different
// goroutines; trySend never waits (the worker uses it).
type ctlConn struct {
	uc  *net.UnixConn
	raw syscall.RawConn
	rb  [ctlLen]byte
	// sendMu keeps one blocking send at a time: each bounds the socket's
	// write deadline and clears it when done, which would lift the bound
	// of a concurrent one (the reader's acks and the domain's revokes run
	// in different goroutines).
	sendMu sync.Mutex
}

func newCtlConn(uc *net.UnixConn) (*ctlConn, error) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	return &ctlConn{uc: uc, raw: raw}, nil
}

// checkPeer refuses processes of other users (root excepted): a peer that
// connects can map every region whose key it knows.
func (c *ctlConn) checkPeer() (pid int, err error) {
	var cred *unix.Ucred
	var cerr error
	if err := c.raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, fmt.Errorf("peer credentials: %w", cerr)
	}
	if me := uint32(os.Geteuid()); cred.Uid != me && cred.Uid != 0 {
		return 0, fmt.Errorf("peer pid %d runs as uid %d, this process as %d", cred.Pid, cred.Uid, me)
	}
	return int(cred.Pid), nil
}

// send writes m with the files fds, waiting at most ctlTimeout().
func (c *ctlConn) send(m ctlMsg, fds ...int) error {
	var b [ctlLen]byte
	m.encode(&b)
	ctx, cancel := context.WithTimeout(context.Background(), ctlTimeout())
	defer cancel()
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return shm.Send(ctx, c.uc, b[:], fds...)
}

// trySend writes m if the socket has room now; sent is false when it has
// not (try again later).
func (c *ctlConn) trySend(m ctlMsg) (sent bool, err error) {
	var b [ctlLen]byte
	m.encode(&b)
	var serr error
	// Control, not Write: Write would check whatever write deadline a
	// concurrent send has set, and park when the socket is full. A
	// non-blocking send needs no deadline.
	if err := c.raw.Control(func(fd uintptr) {
		serr = unix.Sendmsg(int(fd), b[:], nil, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
	}); err != nil {
		return false, err
	}
	if errors.Is(serr, unix.EAGAIN) || errors.Is(serr, unix.ENOBUFS) {
		return false, nil
	}
	return serr == nil, serr
}

// recv reads the next message and the files that came with it (at most
// two; the caller closes them). Any error means the connection is over:
// EOF when the peer closed it or exited.
func (c *ctlConn) recv() (ctlMsg, []int, error) {
	n, fds, err := shm.Receive(context.Background(), c.uc, c.rb[:], 2)
	switch {
	case errors.Is(err, shm.ErrMalformed):
		return ctlMsg{}, nil, fmt.Errorf("control message: %w: %w", err, errProtocol)
	case err != nil:
		return ctlMsg{}, nil, err
	case n == 0:
		shm.CloseAll(fds)
		return ctlMsg{}, nil, errEOF
	case n != ctlLen:
		shm.CloseAll(fds)
		return ctlMsg{}, nil, fmt.Errorf("control message of %d bytes: %w", n, errProtocol)
	}
	var m ctlMsg
	m.decode(c.rb[:])
	return m, fds, nil
}

// peekBye reports whether the next message waiting on the connection is
// a bye, without taking it (the reader does).
func (c *ctlConn) peekBye() bool {
	var b [ctlLen]byte
	n := 0
	_ = c.raw.Control(func(fd uintptr) {
		n, _, _ = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	})
	if n != ctlLen {
		return false
	}
	var m ctlMsg
	m.decode(b[:])
	return m.kind == ctlBye
}

func (c *ctlConn) close() { _ = c.uc.Close() }

var (
	errEOF      = errors.New("connection closed by peer")
	errProtocol = errors.New("ipc protocol violation")
)
