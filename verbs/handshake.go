package verbs

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ibv"
)

// Connection setup. Two domains connect lazily and symmetrically over their
// UD queue pairs: either side may start, both may start at once, and any
// datagram may be lost or duplicated. Three messages exist:
//
//	REQ    "here are my queue pairs (at INIT); connect to them"
//	ACK    "my queue pairs are at RTS towards yours"
//	READY  "so are mine" (answers an ACK)
//
// A side posts only when its own queue pairs are at RTS and it has heard
// ACK or READY from the peer, which proves the peer's are at least at RTR:
// a write never reaches a queue pair that would drop it. Per peer:
//
//	idle ──start/REQ──► connecting ──ACK or READY (and connected)──► established
//	                       │  resend REQ (not connected) or ACK (connected)
//	                       │  every rto, doubling up to rtoMax
//	                       └──deadline──► failed ──start/REQ──► connecting
//
// An error completion on a connected pair (which leaves it in ERR for
// good) restarts the peer: the pair is retired and a new REQ goes out.
//
// Every message carries the sender's queue-pair generation (random per
// creation). A REQ with a new generation means the peer started over
// (restart, or it timed out): the old queue pairs are moved to ERR, which
// flushes what was posted on them, and fresh ones are made. ACK and READY
// echo the generation they answer, so stale ones are ignored.

type hsType uint8

const (
	hsReq   hsType = 1
	hsAck   hsType = 2
	hsReady hsType = 3
)

func (t hsType) String() string {
	switch t {
	case hsReq:
		return "REQ"
	case hsAck:
		return "ACK"
	case hsReady:
		return "READY"
	}
	return "?"
}

// qpInfo is one side's pair of queue pairs.
type qpInfo struct {
	Gen            uint32
	MsgQPN, RMAQPN uint32
	MsgPSN, RMAPSN uint32
	MTU            ibv.MTU
}

// hsMsg is one handshake datagram.
type hsMsg struct {
	Type    hsType
	From    udAddr
	To      udAddr
	QPs     qpInfo
	EchoGen uint32 // the receiver's generation this answers; 0 in a REQ
}

var hsMagic = [4]byte{'f', 'y', 'h', 's'}

const (
	hsVersion = 1
	hsMsgLen  = 8 + 2*udAddrLen + 6*4 + 1
)

func (m *hsMsg) appendTo(b []byte) []byte {
	b = append(b, hsMagic[:]...)
	b = append(b, hsVersion, byte(m.Type), 0, 0)
	b = m.From.appendTo(b)
	b = m.To.appendTo(b)
	for _, v := range [...]uint32{m.QPs.Gen, m.QPs.MsgQPN, m.QPs.RMAQPN, m.QPs.MsgPSN, m.QPs.RMAPSN, m.EchoGen} {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return append(b, byte(m.QPs.MTU))
}

func parseHsMsg(b []byte) (hsMsg, error) {
	var m hsMsg
	if len(b) < hsMsgLen || [4]byte(b[:4]) != hsMagic || b[4] != hsVersion {
		return m, fmt.Errorf("handshake message of %d bytes: %w", len(b), rdma.ErrBadEncoding)
	}
	m.Type = hsType(b[5])
	if m.Type < hsReq || m.Type > hsReady {
		return m, fmt.Errorf("handshake message type %d: %w", b[5], rdma.ErrBadEncoding)
	}
	var err error
	if m.From, err = parseUDAddr(b[8 : 8+udAddrLen]); err != nil {
		return m, err
	}
	if m.To, err = parseUDAddr(b[8+udAddrLen : 8+2*udAddrLen]); err != nil {
		return m, err
	}
	v := b[8+2*udAddrLen:]
	m.QPs.Gen = binary.BigEndian.Uint32(v)
	m.QPs.MsgQPN = binary.BigEndian.Uint32(v[4:])
	m.QPs.RMAQPN = binary.BigEndian.Uint32(v[8:])
	m.QPs.MsgPSN = binary.BigEndian.Uint32(v[12:])
	m.QPs.RMAPSN = binary.BigEndian.Uint32(v[16:])
	m.EchoGen = binary.BigEndian.Uint32(v[20:])
	m.QPs.MTU = ibv.MTU(v[24])
	if m.QPs.Gen == 0 {
		return m, fmt.Errorf("handshake message without generation: %w", rdma.ErrBadEncoding)
	}
	return m, nil
}

// hsEnv is what the state machine asks of its domain; a fake implements it
// in the unit tests.
type hsEnv interface {
	// createQPs makes a fresh pair of queue pairs (at INIT) for p.
	createQPs(p rdma.PeerID) (qpInfo, error)
	// connectQPs moves p's queue pairs to RTS towards remote.
	connectQPs(p rdma.PeerID, remote qpInfo) error
	// resetQPs retires p's queue pairs, flushing what was posted on them.
	resetQPs(p rdma.PeerID)
	// send transmits m to p (best effort; From and To are filled in).
	send(p rdma.PeerID, m *hsMsg)
	// established says p can be posted to.
	established(p rdma.PeerID)
	// failed says p could not be reached before the deadline.
	failed(p rdma.PeerID, err error)
}

type hsPhase uint8

const (
	hsIdle hsPhase = iota
	hsConnecting
	hsEstablished
	hsFailed
)

func (p hsPhase) String() string {
	return [...]string{"idle", "connecting", "established", "failed"}[p]
}

type hsPeer struct {
	phase                  hsPhase
	local, remote          qpInfo
	haveLocal, haveRemote  bool
	connected, remoteReady bool
	deadline, nextSend     time.Time
	rto                    time.Duration
	sent                   int // messages sent, retransmissions included
}

// handshaker runs the connection state machine of one domain. It is driven
// by its domain's worker: start (first op to a peer), receive (a datagram),
// tick (from Poll). Not safe for concurrent use.
type handshaker struct {
	env            hsEnv
	timeout        time.Duration
	rto0, rtoMax   time.Duration
	peers          []hsPeer // indexed by PeerID
	connecting     int
	errTimeout     error
	retransmits    uint64
	staleDiscarded uint64
	restarts       uint64
}

func newHandshaker(env hsEnv, timeout time.Duration) *handshaker {
	return &handshaker{env: env, timeout: timeout, rto0: 20 * time.Millisecond, rtoMax: time.Second,
		errTimeout: &rdma.ProviderError{Provider: "verbs", Op: "connect", Errno: 110,
			Msg: fmt.Sprintf("no handshake answer within %v", timeout), Timeout: true}}
}

func (h *handshaker) peer(p rdma.PeerID) *hsPeer {
	for int(p) >= len(h.peers) {
		h.peers = append(h.peers, hsPeer{})
	}
	return &h.peers[p]
}

func (h *handshaker) phase(p rdma.PeerID) hsPhase {
	if int(p) >= len(h.peers) {
		return hsIdle
	}
	return h.peers[p].phase
}

func (h *handshaker) begin(s *hsPeer, now time.Time) {
	if s.phase != hsConnecting {
		h.connecting++
	}
	s.phase = hsConnecting
	s.deadline = now.Add(h.timeout)
	s.rto = h.rto0
	s.nextSend = now.Add(s.rto)
}

// start begins connecting to p unless that is under way or done.
func (h *handshaker) start(p rdma.PeerID, now time.Time) {
	s := h.peer(p)
	if s.phase == hsConnecting || s.phase == hsEstablished {
		return
	}
	if !s.haveLocal {
		info, err := h.env.createQPs(p)
		if err != nil {
			h.fail(p, s, err)
			return
		}
		s.local, s.haveLocal = info, true
	}
	h.begin(s, now)
	h.transmit(p, s)
}

// transmit sends what the peer is waiting for: REQ until our queue pairs
// are connected, ACK after.
func (h *handshaker) transmit(p rdma.PeerID, s *hsPeer) {
	m := hsMsg{Type: hsReq, QPs: s.local}
	if s.connected {
		m.Type, m.EchoGen = hsAck, s.remote.Gen
	}
	s.sent++
	h.env.send(p, &m)
}

// receive handles one datagram from p.
func (h *handshaker) receive(p rdma.PeerID, m *hsMsg, now time.Time) {
	s := h.peer(p)
	if m.Type != hsReq && (!s.haveLocal || m.EchoGen != s.local.Gen) {
		h.staleDiscarded++ // answers a generation of ours that is gone
		return
	}
	if s.haveRemote && m.QPs.Gen != s.remote.Gen {
		if m.Type != hsReq {
			h.staleDiscarded++
			return
		}
		// The peer started over: drop what was connected to its old pair.
		if s.haveLocal && (s.connected || s.phase == hsEstablished) {
			h.env.resetQPs(p)
			s.haveLocal = false
		}
		s.haveRemote, s.connected, s.remoteReady = false, false, false
		if s.phase == hsEstablished {
			s.phase = hsIdle
		}
	}
	if !s.haveLocal {
		info, err := h.env.createQPs(p)
		if err != nil {
			h.fail(p, s, err)
			return
		}
		s.local, s.haveLocal = info, true
	}
	if s.phase != hsConnecting && s.phase != hsEstablished {
		h.begin(s, now)
	}
	if !s.haveRemote {
		s.remote, s.haveRemote = m.QPs, true
	}
	if !s.connected {
		if err := h.env.connectQPs(p, s.remote); err != nil {
			h.fail(p, s, err)
			return
		}
		s.connected = true
	}
	switch m.Type {
	case hsReq:
		h.env.send(p, &hsMsg{Type: hsAck, QPs: s.local, EchoGen: s.remote.Gen})
	case hsAck:
		s.remoteReady = true
		h.env.send(p, &hsMsg{Type: hsReady, QPs: s.local, EchoGen: s.remote.Gen})
	case hsReady:
		s.remoteReady = true
	}
	if s.remoteReady && s.phase == hsConnecting {
		s.phase = hsEstablished
		h.connecting--
		h.env.established(p)
	}
}

// tick retransmits and enforces deadlines. It does nothing (and costs
// nothing) while no peer is connecting.
func (h *handshaker) tick(now time.Time) {
	if h.connecting == 0 {
		return
	}
	for i := range h.peers {
		s := &h.peers[i]
		if s.phase != hsConnecting {
			continue
		}
		p := rdma.PeerID(i)
		if !now.Before(s.deadline) {
			h.fail(p, s, h.errTimeout)
			continue
		}
		if !now.Before(s.nextSend) {
			h.retransmits++
			h.transmit(p, s)
			s.rto = min(2*s.rto, h.rtoMax)
			s.nextSend = now.Add(s.rto)
		}
	}
}

// restart replaces p's queue pairs and connects again: one of them
// reported an error completion, and an RC queue pair in ERR stays there.
// The REQ with a new generation makes the peer replace its pair too.
func (h *handshaker) restart(p rdma.PeerID, now time.Time) {
	s := h.peer(p)
	if !s.haveLocal {
		return
	}
	if s.phase == hsConnecting {
		h.connecting--
	}
	h.env.resetQPs(p)
	h.restarts++
	*s = hsPeer{}
	h.start(p, now)
}

func (h *handshaker) fail(p rdma.PeerID, s *hsPeer, err error) {
	if s.phase == hsConnecting {
		h.connecting--
	}
	if s.haveLocal {
		h.env.resetQPs(p)
	}
	*s = hsPeer{phase: hsFailed}
	h.env.failed(p, err)
}
