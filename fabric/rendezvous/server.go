package rendezvous

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"
)

// Time limits the server applies on its own, so that a silent or stuck
// peer cannot hold a goroutine forever.
const (
	helloTimeout = 30 * time.Second // from accept to a complete hello
	writeTimeout = 30 * time.Second // one frame to one rank
)

// maxPending bounds the connections accepted but not yet through their
// hello: every rank at once, plus room for retries.
func maxPending(world int) int { return 2*world + 16 }

// server is rank 0's store. One goroutine accepts, one per connection
// reads; all state is under mu, and frames are written outside it with a
// per-connection write lock.
//
// Rounds: the join is round "join"; then collective k is complete when
// every rank sent contribution k. A failure (timeout, lost rank, protocol
// error) is sticky: it is sent to every connected rank and to any rank that
// contributes later.
type server struct {
	ln    net.Listener
	world int
	token string
	limit int // largest contribution

	mu       sync.Mutex
	conns    map[int]*sconn
	pending  map[net.Conn]bool // accepted, hello not yet read
	joined   bool
	seq      uint32
	op       uint8
	root     uint32
	parts    map[int][]byte
	deadline time.Time
	timer    *time.Timer
	gen      uint64 // bumps with every round, so a stale timer does nothing
	failed   *errMsg
	closed   bool

	wg sync.WaitGroup
}

// sconn is one joined rank. Frames decided under server.mu are queued in
// that order and written by the connection's writer goroutine, so a result
// is never overtaken by a later error, and no socket write happens under
// server.mu.
type sconn struct {
	c    net.Conn
	rank int
	wmu  sync.Mutex // serialises writes on c

	qmu   sync.Mutex
	queue [][]byte
	busy  bool // the writer holds frames it has not finished writing
	wake  chan struct{}
	stop  chan struct{}
}

func (sc *sconn) enqueue(frame []byte) {
	sc.qmu.Lock()
	sc.queue = append(sc.queue, frame)
	sc.qmu.Unlock()
	select {
	case sc.wake <- struct{}{}:
	default:
	}
}

func (sc *sconn) idle() bool {
	sc.qmu.Lock()
	defer sc.qmu.Unlock()
	return len(sc.queue) == 0 && !sc.busy
}

func (sc *sconn) write(frame []byte) error {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	_ = sc.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := sc.c.Write(frame)
	return err
}

func (sc *sconn) runWriter(wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-sc.stop:
			return
		case <-sc.wake:
		}
		sc.qmu.Lock()
		frames := sc.queue
		sc.queue = nil
		sc.busy = true
		sc.qmu.Unlock()
		for _, f := range frames {
			if sc.write(f) != nil {
				break // the reader sees the broken connection
			}
		}
		sc.qmu.Lock()
		sc.busy = false
		sc.qmu.Unlock()
	}
}

func newServer(ln net.Listener, world int, token string, limit int) *server {
	s := &server{ln: ln, world: world, token: token, limit: limit,
		conns: map[int]*sconn{}, pending: map[net.Conn]bool{}, parts: map[int][]byte{}}
	s.wg.Add(1)
	go s.runAccept()
	return s
}

func (s *server) runAccept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		if len(s.pending) >= maxPending(s.world) {
			// Connections that never say hello must not pile up.
			s.mu.Unlock()
			refuse(c, codeRejected, "too many connections waiting to join")
			c.Close()
			continue
		}
		s.pending[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go s.runConn(c)
	}
}

func refuse(c net.Conn, code uint8, format string, args ...any) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write(errMsg{code: code, msg: fmt.Sprintf(format, args...)}.encode())
	drain(c)
}

// drain half-closes c and reads what the peer still sends, briefly: closing
// a socket with unread input sends a reset, which can destroy the error
// frame just written before the peer reads it.
func drain(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	_, _ = io.CopyN(io.Discard, c, 4<<20)
}

func (s *server) runConn(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	sc, ok := s.admit(c)
	s.mu.Lock()
	delete(s.pending, c)
	s.mu.Unlock()
	if !ok {
		return
	}
	defer close(sc.stop)
	for {
		k, p, err := readFrame(c, s.limit+64)
		if err != nil {
			s.lost(sc, err)
			return
		}
		if k != kindContrib {
			s.lost(sc, protoErr("rank %d sent a kind-%d message where a contribution belongs", sc.rank, k))
			return
		}
		m, err := decodeContrib(p)
		if err == nil && len(m.data) > s.limit {
			err = fmt.Errorf("rank %d sent %d bytes, limit %d: %w", sc.rank, len(m.data), s.limit, ErrTooLarge)
		}
		if err != nil {
			s.lost(sc, err)
			return
		}
		s.contribute(sc, m)
	}
}

// admit reads and checks the hello, then registers the rank.
func (s *server) admit(c net.Conn) (*sconn, bool) {
	_ = c.SetReadDeadline(time.Now().Add(helloTimeout))
	k, p, err := readFrame(c, 18+maxToken)
	if err != nil {
		refuse(c, codeOf(err), "bad hello: %v", err)
		return nil, false
	}
	if k != kindHello {
		refuse(c, codeProtocol, "expected a hello, got message kind %d", k)
		return nil, false
	}
	h, err := decodeHello(p)
	if err != nil {
		refuse(c, codeProtocol, "bad hello: %v", err)
		return nil, false
	}
	if subtle.ConstantTimeCompare([]byte(h.token), []byte(s.token)) != 1 {
		refuse(c, codeAuth, "wrong job token from a joiner claiming rank %d", h.rank)
		return nil, false
	}
	if int(h.world) != s.world {
		refuse(c, codeRejected, "rank %d says the world has %d ranks, rank 0 says %d", h.rank, h.world, s.world)
		return nil, false
	}
	if int(h.rank) >= s.world {
		refuse(c, codeRejected, "rank %d outside a world of %d", h.rank, s.world)
		return nil, false
	}
	_ = c.SetReadDeadline(time.Time{})
	sc := &sconn{c: c, rank: int(h.rank), wake: make(chan struct{}, 1), stop: make(chan struct{})}
	s.mu.Lock()
	if _, dup := s.conns[sc.rank]; dup || s.joined || s.closed {
		closed := s.closed
		s.mu.Unlock()
		if !closed {
			refuse(c, codeRejected, "rank %d has already joined", h.rank)
		}
		return nil, false
	}
	defer s.mu.Unlock()
	s.conns[sc.rank] = sc
	s.wg.Add(1)
	go sc.runWriter(&s.wg)
	if s.failed != nil {
		sc.enqueue(s.failed.encode())
	} else if len(s.conns) == s.world {
		s.joined = true
		s.resetRound()
		s.toAll(encodeWelcome(uint32(s.world)))
	} else {
		s.armLocked(h.deadline)
	}
	return sc, true
}

// toAll queues frame for every connected rank.
func (s *server) toAll(frame []byte) {
	for _, sc := range s.conns {
		sc.enqueue(frame)
	}
}

func (s *server) resetRound() {
	s.gen++
	s.parts = map[int][]byte{}
	s.op, s.root = 0, 0
	s.deadline = time.Time{}
	if s.timer != nil {
		s.timer.Stop()
	}
}

// armLocked moves the round's deadline earlier when a rank brings an
// earlier one; the timer then reports the ranks still missing.
func (s *server) armLocked(unixNano int64) {
	if unixNano == 0 {
		return
	}
	d := time.Unix(0, unixNano)
	if !s.deadline.IsZero() && !d.Before(s.deadline) {
		return
	}
	s.deadline = d
	if s.timer != nil {
		s.timer.Stop()
	}
	gen := s.gen
	s.timer = time.AfterFunc(time.Until(d), func() { s.expire(gen) })
}

func (s *server) expire(gen uint64) {
	s.mu.Lock()
	if s.gen != gen || s.failed != nil || s.closed {
		s.mu.Unlock()
		return
	}
	s.expireLocked()
	s.mu.Unlock()
}

// expireLocked fails the round in progress with a timeout naming the
// ranks it still waits for.
func (s *server) expireLocked() {
	var missing []uint32
	for r := range s.world {
		_, connected := s.conns[r]
		_, arrived := s.parts[r]
		if !connected || (s.joined && !arrived) {
			missing = append(missing, uint32(r))
		}
	}
	what := "join"
	if s.joined {
		what = fmt.Sprintf("collective %d (%s)", s.seq, opName(s.op))
	}
	s.failLocked(errMsg{code: codeTimeout, missing: missing,
		msg: fmt.Sprintf("%s: deadline passed waiting for rank(s) %v", what, missing)})
}

// notJoined lists the ranks that have not joined yet.
func (s *server) notJoined() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []int
	for r := range s.world {
		if _, ok := s.conns[r]; !ok {
			missing = append(missing, r)
		}
	}
	return missing
}

func (s *server) failLocked(e errMsg) {
	if s.failed != nil {
		return
	}
	s.failed = &e
	if s.timer != nil {
		s.timer.Stop()
	}
	s.toAll(e.encode())
}

func (s *server) contribute(sc *sconn, m contrib) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		sc.enqueue(s.failed.encode())
		return
	}
	switch {
	case !s.joined:
		s.failLocked(errMsg{code: codeProtocol, msg: fmt.Sprintf("rank %d started a collective before every rank joined", sc.rank)})
	case m.seq != s.seq:
		s.failLocked(errMsg{code: codeProtocol, msg: fmt.Sprintf("rank %d sent collective %d, expected %d", sc.rank, m.seq, s.seq)})
	case len(s.parts) > 0 && (m.op != s.op || m.root != s.root):
		s.failLocked(errMsg{code: codeProtocol, msg: fmt.Sprintf("collective %d: rank %d called %s(root %d), others %s(root %d)",
			s.seq, sc.rank, opName(m.op), m.root, opName(s.op), s.root)})
	case m.op == opBroadcast && int(m.root) >= s.world:
		s.failLocked(errMsg{code: codeProtocol, msg: fmt.Sprintf("broadcast root %d outside a world of %d", m.root, s.world)})
	default:
		s.accept(sc, m)
	}
}

func (s *server) accept(sc *sconn, m contrib) {
	if _, dup := s.parts[sc.rank]; dup {
		s.failLocked(errMsg{code: codeProtocol, msg: fmt.Sprintf("rank %d contributed twice to collective %d", sc.rank, s.seq)})
		return
	}
	s.op, s.root = m.op, m.root
	s.parts[sc.rank] = m.data
	if len(s.parts) < s.world {
		s.armLocked(m.deadline)
		return
	}
	res := result{seq: s.seq}
	switch s.op {
	case opAllGather:
		for r := range s.world {
			res.parts = append(res.parts, s.parts[r])
		}
	case opBroadcast:
		res.parts = [][]byte{s.parts[int(s.root)]}
	}
	s.seq++
	s.resetRound()
	s.toAll(res.encode())
}

// lost handles a connection that failed or closed: the job cannot go on
// without that rank, so every other rank hears about it. A rank that broke
// the protocol is told why, synchronously, before its connection closes.
func (s *server) lost(sc *sconn, err error) {
	if errors.Is(err, ErrProtocol) || errors.Is(err, ErrTooLarge) {
		_ = sc.write(errMsg{code: codeOf(err), msg: err.Error()}.encode())
		drain(sc.c)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		delete(s.conns, sc.rank)
		return
	}
	if s.failed == nil && !s.deadline.IsZero() && !time.Now().Before(s.deadline) && !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrTooLarge) {
		// The round's deadline has passed and its timer (late on a loaded
		// machine) has not fired yet: a rank that hangs up now gave up
		// waiting. Report the timeout and the ranks it waited for, as
		// the timer would have, rather than this rank's departure.
		s.expireLocked()
	}
	delete(s.conns, sc.rank)
	code := codePeerLost
	if errors.Is(err, ErrProtocol) || errors.Is(err, ErrTooLarge) {
		code = codeOf(err)
	}
	s.failLocked(errMsg{code: code, missing: []uint32{uint32(sc.rank)},
		msg: fmt.Sprintf("rank %d left: %v", sc.rank, err)})
}

// drainWait bounds how long close waits for queued frames to reach the
// ranks: rank 0 may close as soon as it has its own answer.
const drainWait = 2 * time.Second

// close stops accepting, lets queued frames go out, closes every
// connection and waits for the server's goroutines.
func (s *server) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.wg.Wait()
		return
	}
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.ln.Close()
	for c := range s.pending {
		c.Close()
	}
	conns := make([]*sconn, 0, len(s.conns))
	for _, sc := range s.conns {
		conns = append(conns, sc)
	}
	s.mu.Unlock()
	for end := time.Now().Add(drainWait); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		if !slices.ContainsFunc(conns, func(sc *sconn) bool { return !sc.idle() }) {
			break
		}
	}
	for _, sc := range conns {
		sc.c.Close()
	}
	s.wg.Wait()
}
