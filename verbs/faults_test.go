package verbs

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// Faults on a real device: lost and unanswered handshakes, error
// completions, a peer that vanishes.

// TestHandshakeTimeoutFailsOps resolves an address nobody answers: the
// held ops fail with a timeout instead of hanging.
func TestHandshakeTimeoutFailsOps(t *testing.T) {
	infos := requireDevices(t, 1)
	a := openT(t, infos[0], rdma.DomainOptions{HandshakeTimeout: 300 * time.Millisecond}, 4096)
	ghost := a.self
	ghost.QPN = a.self.QPN + 1000
	// The handshake's deadline runs from when it starts (at the resolve
	// or the first post): measure from before both, so a slow post (the
	// VM runs under emulation) cannot make an on-time failure look early.
	start := time.Now()
	pid, err := a.ResolvePeer(ghost.address())
	if err != nil {
		t.Fatal(err)
	}
	ops := []rdma.WriteOp{
		{Remote: 4096, RemoteKey: 1, Peer: pid, Context: 1, Imm: 1, Flags: rdma.WriteHasImm},
		{Local: uint64(addrOf(a.buf)), Length: 8, LocalDesc: a.keys.Local, Remote: 4096, RemoteKey: 1, Peer: pid, Context: 2},
	}
	if n, err := a.PostWrites(ops); n != 2 || err != nil {
		t.Fatalf("post: %d %v", n, err)
	}
	if n, err := a.PostSends([]rdma.SendOp{{Local: uint64(addrOf(a.buf)), Length: 8, LocalDesc: a.keys.Local, Peer: pid, Context: 3}}); n != 1 || err != nil {
		t.Fatalf("send: %d %v", n, err)
	}
	pump(t, 5*time.Second, func() bool { return len(a.byCtx) == 3 }, a)
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Fatalf("failed after %v, before the deadline", el)
	}
	for c := uint64(1); c <= 3; c++ {
		e := a.byCtx[c]
		err := a.DescribeError(e)
		if e.Errno == 0 || !errors.Is(err, rdma.ErrTimeout) || !errors.Is(err, rdma.ErrProvider) {
			t.Fatalf("op %d: %+v: %v", c, e, err)
		}
	}
	if a.Stats().Retransmits == 0 {
		t.Fatal("no handshake retransmission")
	}
}

// TestRemoteAccessError writes with a wrong remote key: the error comes
// back as a completion classified by wr_id (its opcode is undefined).
func TestRemoteAccessError(t *testing.T) {
	infos := requireDevices(t, 1)
	a := openT(t, infos[0], rdma.DomainOptions{}, 4096)
	b := openT(t, infos[0], rdma.DomainOptions{}, 4096)
	p := a.resolve(b)
	postAllWrites(t, a, []rdma.WriteOp{{Local: uint64(addrOf(a.buf)), Length: 64, LocalDesc: a.keys.Local,
		Remote: uint64(addrOf(b.buf)), RemoteKey: b.keys.Remote ^ 0x5a5a00, Peer: p, Context: 9}}, b)
	pump(t, 30*time.Second, func() bool { return len(a.byCtx) == 1 }, a, b)
	e := a.byCtx[9]
	if e.Kind != rdma.EventWrite || e.Errno == 0 {
		t.Fatalf("bad key write: %+v", e)
	}
	err := a.DescribeError(e)
	var pe *rdma.ProviderError
	if !errors.Is(err, rdma.ErrProvider) || !errors.As(err, &pe) || errors.Is(err, rdma.ErrTimeout) {
		t.Fatalf("error %v", err)
	}
	t.Logf("bad key: %v", err)

	// The failed queue pair is replaced: the next write to the peer works.
	fill(a.buf[:64], 5)
	postAllWrites(t, a, []rdma.WriteOp{{Local: uint64(addrOf(a.buf)), Length: 64, LocalDesc: a.keys.Local,
		Remote: uint64(addrOf(b.buf)), RemoteKey: b.keys.Remote, Peer: p, Context: 10, Imm: 10, Flags: rdma.WriteHasImm}}, b)
	pump(t, 30*time.Second, func() bool { return len(a.byCtx) == 2 && len(b.imms) == 1 }, a, b)
	a.completedOK(10)
	if !bytes.Equal(a.buf[:64], b.buf[:64]) {
		t.Fatal("write after reconnect differs")
	}
	if a.Stats().Reconnects == 0 {
		t.Fatal("no reconnect counted")
	}
}

// TestPeerGone: the peer's domain closes under a connected queue pair.
// Writes then sit unacknowledged in a 6-deep send queue, so ibv_post_send
// refuses part of a chain with ENOMEM and PostWrites counts what it took by
// walking to bad_wr. After the retries run out, every accepted op fails
// exactly once: in flight (retry exceeded, flushed), or held while the
// domain tries to reconnect (handshake deadline).
func TestPeerGone(t *testing.T) {
	infos := requireDevices(t, 1)
	sqDepthOverride = 6
	t.Cleanup(func() { sqDepthOverride = 0 })
	a := openT(t, infos[0], rdma.DomainOptions{QueueDepth: 64, HandshakeTimeout: 500 * time.Millisecond}, 4096)
	b, err := Open(infos[0], rdma.DomainOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bt := &tdom{Domain: b, t: t, byCtx: map[uint64]rdma.Event{}}
	p, err := a.ResolvePeer(b.Address())
	if err != nil {
		t.Fatal(err)
	}
	pump(t, 10*time.Second, func() bool { return a.hs.phase(p) == hsEstablished }, a, bt)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	const n = 40
	ops := make([]rdma.WriteOp, n)
	for i := range ops {
		ops[i] = rdma.WriteOp{Local: uint64(addrOf(a.buf)), Length: 64, LocalDesc: a.keys.Local, Remote: 4096,
			RemoteKey: 1, Peer: p, Context: uint64(i), Imm: uint32(i), Flags: rdma.WriteHasImm}
	}
	k, err := a.PostWrites(ops)
	if err != nil || k == 0 || k >= n {
		t.Fatalf("first post took %d of %d (%v)", k, n, err)
	}
	if a.Stats().SendQueueFull == 0 {
		t.Fatalf("took %d writes into a 6-deep send queue without ENOMEM", k)
	}
	t.Logf("send queue took %d of %d writes before ENOMEM", k, n)
	deadline := time.Now().Add(8 * time.Second)
	for left := ops[k:]; len(left) > 0; {
		m, err := a.PostWrites(left)
		if err != nil {
			t.Fatal(err)
		}
		left = left[m:]
		a.poll()
		if time.Now().After(deadline) {
			t.Fatalf("stuck with %d writes left, %d completions, stats %+v", len(left), len(a.events), a.Stats())
		}
	}
	pump(t, 8*time.Second, func() bool { return len(a.byCtx) == n }, a)
	kinds := map[string]int{}
	for i := range uint64(n) {
		e := a.byCtx[i]
		if e.Errno == 0 {
			t.Fatalf("write %d to a closed peer succeeded", i)
		}
		err := a.DescribeError(e)
		if !errors.Is(err, rdma.ErrProvider) {
			t.Fatalf("write %d: %v", i, err)
		}
		kinds[err.Error()]++
	}
	t.Logf("failures: %v", kinds)
	time.Sleep(100 * time.Millisecond)
	a.poll()
	if len(a.events) != n {
		t.Fatalf("%d events for %d writes", len(a.events), n)
	}
}

// TestLossyHandshake loses handshake datagrams on both sides (every REQ
// and ACK at first, then half of everything) while both sides connect at
// once: retransmission gets them connected, and the ops held meanwhile
// are posted once, in order.
func TestLossyHandshake(t *testing.T) {
	infos := requireDevices(t, 1)
	a := openT(t, infos[0], rdma.DomainOptions{}, 1<<16)
	b := openT(t, infos[0], rdma.DomainOptions{}, 1<<16)
	for _, d := range []*tdom{a, b} {
		n := 0
		d.dropSend = func(m *hsMsg) bool {
			n++
			return n <= 3 || n%2 == 0
		}
	}
	pa, pb := a.resolve(b), b.resolve(a)
	fill(a.buf, 6)
	fill(b.buf, 7)
	var wa, wb []rdma.WriteOp
	for i := range 8 {
		off := uint64(i * 4096)
		wa = append(wa, rdma.WriteOp{Local: uint64(addrOf(a.buf)) + off, Length: 4096, LocalDesc: a.keys.Local,
			Remote: uint64(addrOf(b.buf)) + 32768 + off, RemoteKey: b.keys.Remote, Peer: pa, Context: uint64(i), Imm: uint32(i), Flags: rdma.WriteHasImm})
		wb = append(wb, rdma.WriteOp{Local: uint64(addrOf(b.buf)) + off, Length: 4096, LocalDesc: b.keys.Local,
			Remote: uint64(addrOf(a.buf)) + 32768 + off, RemoteKey: a.keys.Remote, Peer: pb, Context: uint64(i), Imm: uint32(i), Flags: rdma.WriteHasImm})
	}
	postAllWrites(t, a, wa, b)
	postAllWrites(t, b, wb, a)
	pump(t, 20*time.Second, func() bool {
		return len(a.byCtx) == 8 && len(b.byCtx) == 8 && len(a.imms) == 8 && len(b.imms) == 8
	}, a, b)
	for i := range uint64(8) {
		a.completedOK(i)
		b.completedOK(i)
	}
	if !bytes.Equal(a.buf[:32768], b.buf[32768:]) || !bytes.Equal(b.buf[:32768], a.buf[32768:]) {
		t.Fatal("data differs")
	}
	st := a.Stats()
	st2 := b.Stats()
	if st.Retransmits+st2.Retransmits == 0 {
		t.Fatal("connected without retransmitting")
	}
	t.Logf("retransmits %d + %d", st.Retransmits, st2.Retransmits)
}
