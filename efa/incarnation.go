//go:build cgo

package efa

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// Incarnation checks on socket-addressed providers (tcp;ofi_rxm).
//
// A tcp address is an IP address and port, which a restarted process
// takes again when its port is pinned (DomainOptions.Port), and which
// rxm reconnects to without telling anyone. The engine's incarnation in
// the address is checked outside libfabric, so the data path pays
// nothing: every such endpoint answers, on a UDP socket bound to its own
// address and port number, a question "which incarnation are you?" with
// its incarnation. A peer is asked once, synchronously, when it is
// resolved (its first contact), and again, without waiting, at every
// CheckPeer (the engine's liveness checks, and the check it makes before
// it retries a peer it lost): the answer read then is to the previous
// question. An answer with another incarnation, or a refusal (nothing
// bound there: the process is gone), makes the peer stale. No answer at
// all (datagrams filtered on the way, or an endpoint whose port the
// system chose and whose UDP twin was taken) leaves the peer unchecked,
// after up to incFirstWait at its first contact.

const (
	incAsk    = "fiq1" // question: magic, then a u64 tag echoed back
	incAnswer = "fia1" // answer: magic, the tag, the incarnation
	// incFirstWait bounds the first-contact question, over its tries.
	incFirstWait = time.Second
)

// incServer answers incarnation questions for one endpoint.
type incServer struct {
	conn *net.UDPConn
	done sync.WaitGroup
}

func startIncServer(ip net.IP, port int, inc uint64) (*incServer, error) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip, Port: port})
	if err != nil {
		return nil, fmt.Errorf("libfabric tcp: bind incarnation socket %s:%d: %w", ip, port, err)
	}
	s := &incServer{conn: c}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		var buf [64]byte
		out := make([]byte, 0, 20)
		for {
			n, from, err := c.ReadFromUDP(buf[:])
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			if n != 12 || string(buf[:4]) != incAsk {
				continue
			}
			out = append(out[:0], incAnswer...)
			out = append(out, buf[4:12]...)
			out = binary.LittleEndian.AppendUint64(out, inc)
			_, _ = c.WriteToUDP(out, from)
		}
	}()
	return s, nil
}

func (s *incServer) close() {
	if s == nil {
		return
	}
	_ = s.conn.Close()
	s.done.Wait()
}

// incClient asks one peer: a connected, non-blocking UDP socket, so that
// a refusal (ICMP port unreachable) shows as ECONNREFUSED.
type incClient struct {
	fd    int
	addr  rdma.Address
	tag   uint64
	stale error // once stale, for good
}

// sockaddrOf reads a raw libfabric socket address (sockaddr_in or
// sockaddr_in6, as fi_getname gives them).
func sockaddrOf(raw []byte) (unix.Sockaddr, net.IP, int, bool) {
	if len(raw) >= 16 && binary.LittleEndian.Uint16(raw) == unix.AF_INET {
		var sa unix.SockaddrInet4
		sa.Port = int(binary.BigEndian.Uint16(raw[2:]))
		copy(sa.Addr[:], raw[4:8])
		return &sa, net.IP(sa.Addr[:]), sa.Port, true
	}
	if len(raw) >= 28 && binary.LittleEndian.Uint16(raw) == unix.AF_INET6 {
		var sa unix.SockaddrInet6
		sa.Port = int(binary.BigEndian.Uint16(raw[2:]))
		copy(sa.Addr[:], raw[8:24])
		sa.ZoneId = binary.LittleEndian.Uint32(raw[24:])
		return &sa, net.IP(sa.Addr[:]), sa.Port, true
	}
	return nil, nil, 0, false
}

func newIncClient(addr rdma.Address) (*incClient, error) {
	sa, _, _, ok := sockaddrOf(addr.Raw())
	if !ok {
		return nil, nil
	}
	family := unix.AF_INET
	if _, v6 := sa.(*unix.SockaddrInet6); v6 {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("libfabric tcp: incarnation socket: %w", err)
	}
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("libfabric tcp: incarnation socket: %w", err)
	}
	return &incClient{fd: fd, addr: addr}, nil
}

func (c *incClient) close() {
	if c != nil && c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// ask sends a question; a full socket buffer or a pending refusal is
// left to the next read.
func (c *incClient) ask() {
	c.tag++
	var q [12]byte
	copy(q[:], incAsk)
	binary.LittleEndian.PutUint64(q[4:], c.tag)
	_, _ = unix.Write(c.fd, q[:])
}

// read takes the answers that arrived. It returns a stale error, or nil
// with answered set when the live incarnation is the expected one.
func (c *incClient) read() (answered bool, err error) {
	if c.stale != nil {
		return false, c.stale
	}
	defer func() { c.stale = err }()
	var buf [64]byte
	for {
		n, rerr := unix.Read(c.fd, buf[:])
		switch {
		case rerr == unix.EAGAIN || rerr == unix.EINTR:
			return answered, nil
		case rerr == unix.ECONNREFUSED:
			return false, rdma.StaleError(c.addr, "nothing listens at its address any more: its process is gone")
		case rerr != nil:
			return answered, nil
		}
		if n != 20 || string(buf[:4]) != incAnswer {
			continue
		}
		if got := binary.LittleEndian.Uint64(buf[12:]); got != c.addr.Incarnation() {
			return false, rdma.StaleError(c.addr, fmt.Sprintf("another engine (incarnation %016x) now has its address", got))
		}
		answered = true
	}
}

// first asks until answered, refused or incFirstWait passed, sleeping
// between tries: it runs once per peer, at ResolvePeer.
func (c *incClient) first() error {
	deadline := time.Now().Add(incFirstWait)
	wait := 200 * time.Microsecond
	for {
		c.ask()
		pfd := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}}
		_, _ = unix.Poll(pfd, int(max(wait/time.Millisecond, 1)))
		ok, err := c.read()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return nil // unanswered: left unchecked, see above
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// checkIncarnation runs a peer's first-contact check at ResolvePeer.
func (d *Domain) checkIncarnation(id rdma.PeerID, addr rdma.Address) error {
	if d.incPeers == nil || addr.Incarnation() == 0 {
		return nil
	}
	c, err := newIncClient(addr)
	if err != nil || c == nil {
		return err
	}
	if err := c.first(); err != nil {
		c.close()
		return err
	}
	d.incPeers[id] = c
	return nil
}

// recheckIncarnation reads the answer to the last question to p and asks
// again; it never waits.
func (d *Domain) recheckIncarnation(p rdma.PeerID) error {
	c := d.incPeers[p]
	if c == nil {
		return nil
	}
	if _, err := c.read(); err != nil {
		return err
	}
	c.ask()
	return nil
}

func (d *Domain) closeIncarnation() {
	for p, c := range d.incPeers {
		c.close()
		delete(d.incPeers, p)
	}
	d.incSrv.close()
	d.incSrv = nil
}
