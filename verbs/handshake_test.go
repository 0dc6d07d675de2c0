package verbs

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ibv"
)

// fakeSide is one domain's view for the state machine: queue pairs are
// numbers, sends go to a shared fake network.
type fakeSide struct {
	name      string
	net       *fakeNet
	h         *handshaker
	gen       uint32
	local     qpInfo
	connected *qpInfo // what our queue pairs point at
	resets    int
	estab     int
	failures  []error
	createErr error
}

func (f *fakeSide) createQPs(rdma.PeerID) (qpInfo, error) {
	if f.createErr != nil {
		return qpInfo{}, f.createErr
	}
	f.gen++
	base := uint32(len(f.name))*1000 + f.gen*10
	f.local = qpInfo{Gen: f.gen + uint32(len(f.name))<<16, MsgQPN: base, RMAQPN: base + 1, MsgPSN: 7, RMAPSN: 9, MTU: ibv.MTU1024}
	f.connected = nil
	return f.local, nil
}

func (f *fakeSide) connectQPs(_ rdma.PeerID, r qpInfo) error {
	if f.connected != nil {
		panic("connect twice without reset")
	}
	f.connected = &r
	return nil
}

func (f *fakeSide) resetQPs(rdma.PeerID) { f.resets++; f.connected = nil }
func (f *fakeSide) send(_ rdma.PeerID, m *hsMsg) {
	f.net.sent = append(f.net.sent, wire{from: f, msg: *m})
}
func (f *fakeSide) established(rdma.PeerID)       { f.estab++ }
func (f *fakeSide) failed(_ rdma.PeerID, e error) { f.failures = append(f.failures, e) }

type wire struct {
	from *fakeSide
	msg  hsMsg
}

// fakeNet carries messages between two sides; drop decides each message's
// fate by its sequence number.
type fakeNet struct {
	a, b *fakeSide
	sent []wire
	seq  int
	drop func(seq int, m hsMsg) bool
	dup  bool
}

func newPair(t *testing.T) (*fakeNet, *fakeSide, *fakeSide) {
	t.Helper()
	n := &fakeNet{}
	n.a = &fakeSide{name: "a", net: n}
	n.b = &fakeSide{name: "bb", net: n}
	n.a.h = newHandshaker(n.a, time.Second)
	n.b.h = newHandshaker(n.b, time.Second)
	return n, n.a, n.b
}

// deliver delivers everything in flight (and whatever that causes).
func (n *fakeNet) deliver(now time.Time) {
	for len(n.sent) > 0 {
		w := n.sent[0]
		n.sent = n.sent[1:]
		n.seq++
		if n.drop != nil && n.drop(n.seq, w.msg) {
			continue
		}
		to := n.a
		if w.from == n.a {
			to = n.b
		}
		to.h.receive(0, &w.msg, now)
		if n.dup {
			to.h.receive(0, &w.msg, now)
		}
	}
}

// run advances time in steps, ticking both sides, until both are
// established or failed, or limit passes.
func (n *fakeNet) run(t0 time.Time, limit time.Duration) time.Time {
	now := t0
	for now.Sub(t0) < limit {
		n.deliver(now)
		if n.settled() {
			return now
		}
		now = now.Add(5 * time.Millisecond)
		n.a.h.tick(now)
		n.b.h.tick(now)
	}
	return now
}

func (n *fakeNet) settled() bool {
	done := func(p hsPhase) bool { return p == hsEstablished || p == hsFailed }
	return done(n.a.h.phase(0)) && done(n.b.h.phase(0))
}

// requireConnected checks the safety property: both established, each
// side's queue pairs pointing at the other's current ones.
func requireConnected(t *testing.T, a, b *fakeSide) {
	t.Helper()
	require.Equal(t, hsEstablished, a.h.phase(0), "a")
	require.Equal(t, hsEstablished, b.h.phase(0), "b")
	require.NotNil(t, a.connected)
	require.NotNil(t, b.connected)
	require.Equal(t, b.local, *a.connected)
	require.Equal(t, a.local, *b.connected)
	require.Zero(t, a.h.connecting)
	require.Zero(t, b.h.connecting)
}

func TestHandshakeSimple(t *testing.T) {
	n, a, b := newPair(t)
	now := time.Unix(0, 0)
	a.h.start(0, now)
	n.run(now, 2*time.Second)
	requireConnected(t, a, b)
	require.Equal(t, 1, a.estab)
	require.Equal(t, 1, b.estab)
	require.Equal(t, 3, n.seq, "REQ, ACK, READY")
}

func TestHandshakeCrossing(t *testing.T) {
	n, a, b := newPair(t)
	now := time.Unix(0, 0)
	a.h.start(0, now)
	b.h.start(0, now)
	n.run(now, 2*time.Second)
	requireConnected(t, a, b)
	require.Equal(t, 1, a.estab)
	require.Equal(t, 1, b.estab)
}

func TestHandshakeDuplicates(t *testing.T) {
	n, a, b := newPair(t)
	n.dup = true
	now := time.Unix(0, 0)
	a.h.start(0, now)
	a.h.start(0, now) // a second start is a no-op
	n.run(now, 2*time.Second)
	requireConnected(t, a, b)
	require.Equal(t, 1, a.estab, "established reported once")
	require.Equal(t, 1, b.estab)
}

func TestHandshakeLosses(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop func(seq int, m hsMsg) bool
	}{
		{"first REQ", func(seq int, _ hsMsg) bool { return seq == 1 }},
		{"ACK", func(seq int, m hsMsg) bool { return seq == 2 }},
		{"READY", func(seq int, m hsMsg) bool { return m.Type == hsReady && seq < 6 }},
		{"every other", func(seq int, _ hsMsg) bool { return seq%2 == 1 && seq < 12 }},
		{"first five", func(seq int, _ hsMsg) bool { return seq <= 5 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, a, b := newPair(t)
			n.drop = tc.drop
			now := time.Unix(0, 0)
			a.h.start(0, now)
			n.run(now, 2*time.Second)
			requireConnected(t, a, b)
			require.Equal(t, 1, a.estab)
			require.Equal(t, 1, b.estab)
			require.NotZero(t, a.h.retransmits+b.h.retransmits)
		})
	}
}

func TestHandshakeCrossingWithLoss(t *testing.T) {
	n, a, b := newPair(t)
	n.drop = func(seq int, m hsMsg) bool { return m.Type == hsAck && seq < 5 }
	now := time.Unix(0, 0)
	a.h.start(0, now)
	b.h.start(0, now)
	n.run(now, 2*time.Second)
	requireConnected(t, a, b)
}

func TestHandshakeTimeout(t *testing.T) {
	n, a, _ := newPair(t)
	n.drop = func(int, hsMsg) bool { return true }
	now := time.Unix(0, 0)
	a.h.start(0, now)
	end := n.run(now, 3*time.Second)
	require.Equal(t, hsFailed, a.h.phase(0))
	require.Len(t, a.failures, 1)
	require.True(t, errors.Is(a.failures[0], rdma.ErrTimeout))
	require.True(t, errors.Is(a.failures[0], rdma.ErrProvider))
	require.Equal(t, 1, a.resets, "queue pairs retired")
	require.Zero(t, a.h.connecting)
	require.GreaterOrEqual(t, end.Sub(now), time.Second)
	// Backoff bounds the retransmissions within the one-second deadline.
	require.Less(t, a.h.retransmits, uint64(12))

	// A later op starts over, and now the network works.
	n.drop = nil
	a.h.start(0, end)
	n.run(end, 2*time.Second)
	requireConnected(t, a, n.b)
}

func TestHandshakePeerRestart(t *testing.T) {
	n, a, b := newPair(t)
	now := time.Unix(0, 0)
	a.h.start(0, now)
	now = n.run(now, time.Second)
	requireConnected(t, a, b)

	// b forgets everything (process restart) and connects again.
	b2 := &fakeSide{name: "bb", net: n, gen: 50}
	b2.h = newHandshaker(b2, time.Second)
	n.b = b2
	b2.h.start(0, now)
	n.run(now, 2*time.Second)
	requireConnected(t, a, b2)
	require.Equal(t, 1, a.resets, "old queue pairs flushed")
	require.Equal(t, 2, a.estab)
}

func TestHandshakeStaleAnswersIgnored(t *testing.T) {
	n, a, b := newPair(t)
	now := time.Unix(0, 0)
	a.h.start(0, now)
	n.run(now, time.Second)
	requireConnected(t, a, b)
	// An ACK echoing a generation a no longer has changes nothing.
	stale := hsMsg{Type: hsAck, QPs: b.local, EchoGen: a.local.Gen + 99}
	a.h.receive(0, &stale, now)
	// An ACK from a generation of b that a never saw changes nothing.
	other := hsMsg{Type: hsAck, QPs: qpInfo{Gen: 4242}, EchoGen: a.local.Gen}
	a.h.receive(0, &other, now)
	require.Equal(t, uint64(2), a.h.staleDiscarded)
	requireConnected(t, a, b)
	require.Empty(t, n.sent)
}

func TestHandshakeCreateFails(t *testing.T) {
	_, a, _ := newPair(t)
	a.createErr = errors.New("out of queue pairs")
	a.h.start(0, time.Unix(0, 0))
	require.Equal(t, hsFailed, a.h.phase(0))
	require.Len(t, a.failures, 1)
	require.Zero(t, a.h.connecting)
}

func TestHandshakeCodec(t *testing.T) {
	m := hsMsg{Type: hsAck,
		From:    udAddr{Link: ibv.LinkEthernet, GID: [16]byte{0: 0xfe, 15: 1}, QPN: 17, LID: 0},
		To:      udAddr{Link: ibv.LinkEthernet, GID: [16]byte{10: 0xff, 11: 0xff, 12: 10}, QPN: 18},
		QPs:     qpInfo{Gen: 5, MsgQPN: 100, RMAQPN: 101, MsgPSN: 0xabcdef, RMAPSN: 3, MTU: ibv.MTU4096},
		EchoGen: 77}
	b := m.appendTo(nil)
	require.Len(t, b, hsMsgLen)
	require.LessOrEqual(t, len(b), ibv.UDMsgMax)
	got, err := parseHsMsg(b)
	require.NoError(t, err)
	require.Equal(t, m, got)
	for _, bad := range [][]byte{nil, b[:hsMsgLen-1], append([]byte("xxxx"), b[4:]...)} {
		_, err := parseHsMsg(bad)
		require.ErrorIs(t, err, rdma.ErrBadEncoding)
	}
	c := append([]byte(nil), b...)
	c[5] = 9
	_, err = parseHsMsg(c)
	require.ErrorIs(t, err, rdma.ErrBadEncoding)
}

// TestHandshakeRestartAfterError: one side's queue pair failed; it starts
// over with a new generation and the other side follows.
func TestHandshakeRestartAfterError(t *testing.T) {
	n, a, b := newPair(t)
	now := time.Unix(0, 0)
	a.h.start(0, now)
	now = n.run(now, time.Second)
	requireConnected(t, a, b)
	old := a.local.Gen
	a.h.restart(0, now)
	require.Equal(t, hsConnecting, a.h.phase(0))
	n.run(now, time.Second)
	requireConnected(t, a, b)
	require.NotEqual(t, old, a.local.Gen)
	require.Equal(t, 1, a.resets)
	require.Equal(t, 1, b.resets, "b replaced the pair connected to a's old one")
	require.Equal(t, 2, a.estab)
	require.Equal(t, 2, b.estab)

	// Both sides fail at once (each saw errors): they still converge.
	a.h.restart(0, now)
	b.h.restart(0, now)
	n.run(now, time.Second)
	requireConnected(t, a, b)

	// Restarting a peer that has no queue pairs does nothing.
	_, c, _ := newPair(t)
	c.h.restart(0, now)
	require.Equal(t, hsIdle, c.h.phase(0))
}
