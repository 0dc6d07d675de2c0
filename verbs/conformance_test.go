package verbs

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// The domain-level conformance suite: two domains in one process, on a
// real verbs device (Soft-RoCE in make test-verbs).

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

func TestWriteWithImm(t *testing.T) {
	infos := requireDevices(t, 1)
	a := openT(t, infos[0], rdma.DomainOptions{}, 4<<20)
	b := openT(t, infos[0], rdma.DomainOptions{}, 4<<20)
	fill(a.buf, 3)
	peer := a.resolve(b) // ops below are held until the handshake ends
	sizes := []uint64{1, 4096, 65536, 1 << 20, 3<<20 + 17}
	var ops []rdma.WriteOp
	off := uint64(0)
	for i, n := range sizes {
		ops = append(ops, rdma.WriteOp{Local: uint64(addrOf(a.buf)) + off, Length: n, LocalDesc: a.keys.Local,
			Remote: uint64(addrOf(b.buf)) + off, RemoteKey: b.keys.Remote, Peer: peer,
			Context: uint64(100 + i), Imm: uint32(0xabc00000 + i), Flags: rdma.WriteHasImm})
		off += n
	}
	ops[len(ops)-1].Length = uint64(len(a.buf)) - (off - ops[len(ops)-1].Length)
	postAllWrites(t, a, ops, b)
	pump(t, 30*time.Second, func() bool { return len(a.byCtx) == len(ops) && len(b.imms) == len(ops) }, a, b)
	for i := range ops {
		a.completedOK(uint64(100 + i))
	}
	slices.Sort(b.imms)
	for i, v := range b.imms {
		if v != uint32(0xabc00000+i) {
			t.Fatalf("imm %d = %#x", i, v)
		}
	}
	if !bytes.Equal(a.buf, b.buf) {
		t.Fatal("data differs after writes")
	}
	t.Logf("thread domain: %v, gid index %d, info %+v", a.ThreadDomain(), a.GIDIndex(), a.Info())
}

func TestImmOnlyAndPlainWrites(t *testing.T) {
	infos := requireDevices(t, 1)
	a := openT(t, infos[0], rdma.DomainOptions{}, 1<<16)
	b := openT(t, infos[0], rdma.DomainOptions{}, 1<<16)
	peer := a.resolve(b)
	fill(a.buf, 9)
	ops := []rdma.WriteOp{
		// immediate only: no SGE, still a valid remote address and key
		{Remote: uint64(addrOf(b.buf)), RemoteKey: b.keys.Remote, Peer: peer, Context: 1, Imm: 0xdeadbeef, Flags: rdma.WriteHasImm},
		// plain write: data, no immediate at the target
		{Local: uint64(addrOf(a.buf)), Length: 1 << 16, LocalDesc: a.keys.Local, Remote: uint64(addrOf(b.buf)),
			RemoteKey: b.keys.Remote, Peer: peer, Context: 2},
		// zero-byte write with immediate at the very end of the region
		{Remote: uint64(addrOf(b.buf)) + 1<<16, RemoteKey: b.keys.Remote, Peer: peer, Context: 3, Imm: 7, Flags: rdma.WriteHasImm},
	}
	postAllWrites(t, a, ops, b)
	pump(t, 30*time.Second, func() bool { return len(a.byCtx) == 3 && len(b.imms) == 2 }, a, b)
	for c := uint64(1); c <= 3; c++ {
		a.completedOK(c)
	}
	slices.Sort(b.imms)
	if !slices.Equal(b.imms, []uint32{7, 0xdeadbeef}) {
		t.Fatalf("imms %#x", b.imms)
	}
	if !bytes.Equal(a.buf, b.buf) {
		t.Fatal("plain write did not land")
	}
	// Let stray completions arrive: there must be none.
	time.Sleep(50 * time.Millisecond)
	a.poll()
	b.poll()
	if len(b.imms) != 2 || len(a.events) != 3 {
		t.Fatalf("extra completions: a %v, b imms %v", a.events, b.imms)
	}
}

// TestPagedWritesBackPressure posts many small pages through a shallow
// domain: the slot table (QueueDepth) fills, PostWrites takes part of each
// batch, and every op still completes exactly once. (rxe completes work
// inside ibv_post_send, so its send queue never fills here; TestPeerGone
// fills it.)
func TestPagedWritesBackPressure(t *testing.T) {
	infos := requireDevices(t, 1)
	opts := rdma.DomainOptions{QueueDepth: 32}
	const pages, page = 2000, 512
	a := openT(t, infos[0], opts, pages*page)
	b := openT(t, infos[0], opts, pages*page)
	peer := a.resolve(b)
	fill(a.buf, 1)
	ops := make([]rdma.WriteOp, pages)
	for i := range ops {
		// pages land in reverse order, to see each goes where it should
		src, dst := uint64(i*page), uint64((pages-1-i)*page)
		ops[i] = rdma.WriteOp{Local: uint64(addrOf(a.buf)) + src, Length: page, LocalDesc: a.keys.Local,
			Remote: uint64(addrOf(b.buf)) + dst, RemoteKey: b.keys.Remote, Peer: peer, Context: uint64(i),
			Imm: uint32(i), Flags: rdma.WriteHasImm}
	}
	// Wait for the connection, so the pushback below comes from the queues.
	pump(t, 10*time.Second, func() bool { return a.hs.phase(peer) == hsEstablished }, a, b)
	pushback := postAllWrites(t, a, ops, b)
	pump(t, 60*time.Second, func() bool { return len(a.byCtx) == pages && len(b.imms) == pages }, a, b)
	for i := range pages {
		a.completedOK(uint64(i))
		if !bytes.Equal(a.buf[i*page:(i+1)*page], b.buf[(pages-1-i)*page:(pages-i)*page]) {
			t.Fatalf("page %d differs", i)
		}
	}
	slices.Sort(b.imms)
	for i, v := range b.imms {
		if v != uint32(i) {
			t.Fatalf("imm %d missing", i)
		}
	}
	if st := a.Stats(); pushback == 0 || st.SlotsFull == 0 {
		t.Fatalf("a 32-deep domain took 2000 writes without pushing back (%d): %+v", pushback, st)
	}
	t.Logf("pushed back %d times", pushback)
}

func TestSendRecv(t *testing.T) {
	infos := requireDevices(t, 1)
	a := openT(t, infos[0], rdma.DomainOptions{}, 1<<16)
	b := openT(t, infos[0], rdma.DomainOptions{}, 1<<16)
	const n, size = 16, 1024
	var recvs []rdma.RecvOp
	for i := range n {
		recvs = append(recvs, rdma.RecvOp{Local: uint64(addrOf(b.buf)) + uint64(i*size), Length: size,
			LocalDesc: b.keys.Local, Context: uint64(1000 + i)})
	}
	if k, err := b.PostRecvs(recvs); err != nil || k != n {
		t.Fatalf("post recvs: %d, %v", k, err)
	}
	peer := a.resolve(b)
	var sends []rdma.SendOp
	for i := range n {
		msg := a.buf[i*size : i*size+100+i]
		copy(msg, bytes.Repeat([]byte{byte(i + 1)}, len(msg)))
		sends = append(sends, rdma.SendOp{Local: uint64(addrOf(msg)), Length: uint64(len(msg)),
			LocalDesc: a.keys.Local, Peer: peer, Context: uint64(i)})
	}
	for len(sends) > 0 {
		k, err := a.PostSends(sends)
		if err != nil {
			t.Fatalf("post sends: %v", err)
		}
		sends = sends[k:]
		a.poll()
		b.poll()
	}
	pump(t, 30*time.Second, func() bool { return len(a.byCtx) == n && len(b.byCtx) == n }, a, b)
	got := map[byte]int{}
	for i := range n {
		a.completedOK(uint64(i))
		e := b.byCtx[uint64(1000+i)]
		if e.Kind != rdma.EventRecv || e.Errno != 0 {
			t.Fatalf("recv %d: %+v", i, e)
		}
		msg := b.buf[i*size : i*size+int(e.Length)]
		if len(msg) < 100 || !bytes.Equal(msg, bytes.Repeat(msg[:1], len(msg))) {
			t.Fatalf("recv %d: %d bytes %x", i, len(msg), msg[:8])
		}
		got[msg[0]] = len(msg)
	}
	for i := range n {
		if got[byte(i+1)] != 100+i {
			t.Fatalf("message %d: %d bytes", i, got[byte(i+1)])
		}
	}
}

// TestCrossingConnect has both sides resolve each other and write at once.
func TestCrossingConnect(t *testing.T) {
	infos := requireDevices(t, 1)
	a := openT(t, infos[0], rdma.DomainOptions{}, 1<<16)
	b := openT(t, infos[0], rdma.DomainOptions{}, 1<<16)
	pa, pb := a.resolve(b), b.resolve(a)
	w := func(from, to *tdom, p rdma.PeerID) {
		postAllWrites(t, from, []rdma.WriteOp{{Local: uint64(addrOf(from.buf)), Length: 4096, LocalDesc: from.keys.Local,
			Remote: uint64(addrOf(to.buf)) + 8192, RemoteKey: to.keys.Remote, Peer: p, Context: 5, Imm: 55, Flags: rdma.WriteHasImm}})
	}
	fill(a.buf[:4096], 1)
	fill(b.buf[:4096], 2)
	w(a, b, pa)
	w(b, a, pb)
	pump(t, 30*time.Second, func() bool { return len(a.imms) == 1 && len(b.imms) == 1 && len(a.byCtx) == 1 && len(b.byCtx) == 1 }, a, b)
	a.completedOK(5)
	b.completedOK(5)
	if !bytes.Equal(a.buf[8192:12288], b.buf[:4096]) || !bytes.Equal(b.buf[8192:12288], a.buf[:4096]) {
		t.Fatal("crossing writes differ")
	}
	if a.Stats().Peers != 1 || b.Stats().Peers != 1 {
		t.Fatalf("peers: %d %d", a.Stats().Peers, b.Stats().Peers)
	}
}

// TestTwoNICs runs two pairs on two devices at once, as a 2-NIC group does.
func TestTwoNICs(t *testing.T) {
	infos := requireDevices(t, 2)
	var pairs [2][2]*tdom
	for i := range 2 {
		pairs[i][0] = openT(t, infos[i], rdma.DomainOptions{}, 1<<20)
		pairs[i][1] = openT(t, infos[i], rdma.DomainOptions{}, 1<<20)
		fill(pairs[i][0].buf, byte(10*i))
	}
	for i := range 2 {
		a, b := pairs[i][0], pairs[i][1]
		p := a.resolve(b)
		var ops []rdma.WriteOp
		for k := range 16 {
			off := uint64(k << 16)
			ops = append(ops, rdma.WriteOp{Local: uint64(addrOf(a.buf)) + off, Length: 1 << 16, LocalDesc: a.keys.Local,
				Remote: uint64(addrOf(b.buf)) + off, RemoteKey: b.keys.Remote, Peer: p, Context: uint64(k),
				Imm: uint32(i<<8 | k), Flags: rdma.WriteHasImm})
		}
		postAllWrites(t, a, ops, b)
	}
	all := []*tdom{pairs[0][0], pairs[0][1], pairs[1][0], pairs[1][1]}
	pump(t, 30*time.Second, func() bool {
		return len(pairs[0][1].imms) == 16 && len(pairs[1][1].imms) == 16 && len(pairs[0][0].byCtx) == 16 && len(pairs[1][0].byCtx) == 16
	}, all...)
	for i := range 2 {
		if !bytes.Equal(pairs[i][0].buf, pairs[i][1].buf) {
			t.Fatalf("nic %d: data differs", i)
		}
		if pairs[i][0].Info().Name != infos[i].Name {
			t.Fatalf("nic %d opened %s", i, pairs[i][0].Info().Name)
		}
	}
}

// TestLoopbackSelf writes from a domain into itself.
func TestLoopbackSelf(t *testing.T) {
	infos := requireDevices(t, 1)
	a := openT(t, infos[0], rdma.DomainOptions{}, 1<<16)
	self := a.resolve(a)
	fill(a.buf[:4096], 4)
	postAllWrites(t, a, []rdma.WriteOp{{Local: uint64(addrOf(a.buf)), Length: 4096, LocalDesc: a.keys.Local,
		Remote: uint64(addrOf(a.buf)) + 4096, RemoteKey: a.keys.Remote, Peer: self, Context: 1, Imm: 1, Flags: rdma.WriteHasImm}})
	pump(t, 10*time.Second, func() bool { return len(a.byCtx) == 1 && len(a.imms) == 1 }, a)
	a.completedOK(1)
	if !bytes.Equal(a.buf[:4096], a.buf[4096:8192]) {
		t.Fatal("self write differs")
	}
}

func TestBadInputs(t *testing.T) {
	infos := requireDevices(t, 1)
	a := openT(t, infos[0], rdma.DomainOptions{}, 4096)
	b := openT(t, infos[0], rdma.DomainOptions{}, 4096)
	raw, _ := rdma.AddressFromRaw([]byte{1, 2, 3})
	if _, err := a.ResolvePeer(raw); !errors.Is(err, rdma.ErrBadEncoding) {
		t.Fatalf("short address: %v", err)
	}
	p := a.resolve(b)
	good := rdma.WriteOp{Remote: uint64(addrOf(b.buf)), RemoteKey: b.keys.Remote, Peer: p, Context: 1, Imm: 1, Flags: rdma.WriteHasImm}
	for i, bad := range []rdma.WriteOp{
		{Peer: 999, Context: 2},
		{Local: uint64(addrOf(a.buf)), Length: 1 << 33, LocalDesc: a.keys.Local, Peer: p, Context: 2},
	} {
		good.Context = uint64(10 + i)
		n, err := a.PostWrites([]rdma.WriteOp{good, bad, good})
		if n != 1 || !errors.Is(err, rdma.ErrInvalidArgument) {
			t.Fatalf("bad op %+v: n=%d err=%v", bad, n, err)
		}
	}
	if n, err := a.PostSends([]rdma.SendOp{{Peer: 77}}); n != 0 || !errors.Is(err, rdma.ErrInvalidArgument) {
		t.Fatalf("send to unknown peer: %d %v", n, err)
	}
	if n, err := a.PostRecvs([]rdma.RecvOp{{Local: 1, Length: 1 << 40}}); n != 0 || !errors.Is(err, rdma.ErrInvalidArgument) {
		t.Fatalf("huge recv: %d %v", n, err)
	}
	if _, err := a.RegisterMemory(rdma.MemorySpan{}, rdma.AccessLocal); !errors.Is(err, rdma.ErrInvalidArgument) {
		t.Fatalf("empty span: %v", err)
	}
	if err := a.UnregisterMemory(rdma.MemoryKeys{Handle: 12345}); !errors.Is(err, rdma.ErrUnknownRegion) {
		t.Fatalf("unknown region: %v", err)
	}
	// The two good ops each completed once.
	pump(t, 30*time.Second, func() bool { return len(a.byCtx) == 2 && len(b.imms) == 2 }, a, b)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := a.PostWrites([]rdma.WriteOp{good}); !errors.Is(err, rdma.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
	if _, err := a.Poll(make([]rdma.Event, 4)); !errors.Is(err, rdma.ErrClosed) {
		t.Fatalf("poll after close: %v", err)
	}
}
