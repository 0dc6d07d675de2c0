package ipc_test

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/ipc"
)

// TestWrites: writes of every size class land with their immediates
// (a large one through the helper copiers), held while the connection and
// mapping are set up; bad keys, ranges and peers fail with their errors;
// a zero-byte write carries its immediate without a key.
func TestWrites(t *testing.T) {
	a, b := openSide(t, 16<<20), openSide(t, 16<<20)
	fill(a.buf.Bytes(), 3)
	peer := a.resolve(b)
	sizes := []uint64{1, 64, 4096, 65536, 1<<20 + 3, 9<<20 + 5}
	var ops []rdma.WriteOp
	off := uint64(0)
	for i, n := range sizes {
		ops = append(ops, a.write(peer, b, off, n, uint64(i+1), uint32(100+i)))
		off += n
	}
	a.post(ops...) // before the connection is up: all held
	pump(t, 10*time.Second, func() bool { return len(a.byCtx) == len(ops) && len(b.imms) == len(ops) }, a, b)
	for _, op := range ops {
		require.Zero(t, a.byCtx[op.Context].Errno)
	}
	require.True(t, bytes.Equal(a.buf.Bytes()[:off], b.buf.Bytes()[:off]), "bytes differ")
	require.ElementsMatch(t, []uint32{100, 101, 102, 103, 104, 105}, b.imms)

	bad := []rdma.WriteOp{
		a.write(peer, b, uint64(b.buf.Len())-10, 11, 20, 0),                                  // past the end
		a.write(peer, b, 1<<62, 1, 21, 0),                                                    // far past the end
		{Local: a.addr(0), Length: 8, RemoteKey: b.keys.Remote ^ 1, Peer: peer, Context: 22}, // unknown key
		{Local: a.addr(0), Length: 8, RemoteKey: b.keys.Remote, Peer: peer + 7, Context: 23}, // unknown peer
		{Peer: peer, Context: 24, Imm: 77, Flags: rdma.WriteHasImm, RemoteKey: 12345},        // zero bytes: no key check
	}
	b.imms = nil
	a.post(bad...)
	pump(t, 10*time.Second, func() bool { return len(a.byCtx) == len(ops)+len(bad) && len(b.imms) == 1 }, a, b)
	for ctx, errno := range map[uint64]int32{20: 13, 21: 13, 22: 126, 23: 22, 24: 0} {
		ev := a.byCtx[ctx]
		require.Equal(t, errno, ev.Errno, "context %d", ctx)
		if errno != 0 {
			err := a.d.DescribeError(ev)
			require.ErrorIs(t, err, rdma.ErrProvider)
			require.NotErrorIs(t, err, rdma.ErrPeerLost)
		}
	}
	require.Equal(t, []uint32{77}, b.imms)
}

// TestRingFullHolds: a target that does not poll stops its initiators
// once its immediate ring is full; their writes are held, not refused,
// and complete in order once it drains.
func TestRingFullHolds(t *testing.T) {
	a, b := openSide(t, 1<<20), openSide(t, 1<<20)
	peer := a.resolve(b)
	const total = 1<<14 + 500
	ops := make([]rdma.WriteOp, 0, 256)
	for i := 0; i < total; i += len(ops) {
		ops = ops[:0]
		for j := i; j < min(total, i+256); j++ {
			ops = append(ops, rdma.WriteOp{Local: a.addr(0), Length: 8, Remote: 8, RemoteKey: b.keys.Remote,
				Peer: peer, Context: uint64(j), Imm: uint32(j), Flags: rdma.WriteHasImm})
		}
		a.post(ops...)
		a.poll()
	}
	// b never polled: a can finish at most a ring's worth.
	pump(t, 10*time.Second, func() bool { return len(a.byCtx) >= 1<<14 }, a)
	a.poll()
	require.Equal(t, 1<<14, len(a.byCtx), "writes past the ring's capacity are held")
	pump(t, 10*time.Second, func() bool { return len(b.imms) == total && len(a.byCtx) == total }, a, b)
	for i, v := range b.imms {
		require.EqualValues(t, i, v, "immediates of one connection arrive in order")
	}
}

// TestUnregisterRevokes: after the target unregisters a region, writes
// into it fail and the initiator's mapping is gone, whether or not the
// initiator polled meanwhile.
func TestUnregisterRevokes(t *testing.T) {
	a, b := openSide(t, 1<<20), openSide(t, 1<<20)
	peer := a.resolve(b)
	extra, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	defer extra.Free()
	k2, err := b.d.RegisterMemory(extra.Span(), rdma.AccessRemoteWrite)
	require.NoError(t, err)
	w := rdma.WriteOp{Local: a.addr(0), Length: 4096, RemoteKey: k2.Remote, Peer: peer, Context: 1}
	a.post(w)
	pump(t, 10*time.Second, func() bool { return len(a.byCtx) == 1 }, a, b)
	require.Zero(t, a.byCtx[1].Errno)
	before := ipc.LiveMappings()
	require.NoError(t, b.d.UnregisterMemory(k2)) // a's reader acknowledges; a's worker is idle
	require.Equal(t, before-1, ipc.LiveMappings(), "the initiator unmapped the region")
	w.Context = 2
	a.post(w)
	pump(t, 10*time.Second, func() bool { return len(a.byCtx) == 2 }, a, b)
	require.EqualValues(t, 126, a.byCtx[2].Errno, "a write after unregistration fails")
	require.ErrorIs(t, a.d.DescribeError(a.byCtx[2]), rdma.ErrUnknownRegion)
	require.ErrorIs(t, b.d.UnregisterMemory(k2), rdma.ErrUnknownRegion)
}

// TestSendRecv: messages land in posted buffers in order; a message
// larger than its buffer completes the receive with EMSGSIZE; one larger
// than the ring fails at the sender; a full ring makes the sender busy.
func TestSendRecv(t *testing.T) {
	a, b := openSide(t, 4<<20), openSide(t, 4<<20)
	fill(a.buf.Bytes(), 9)
	peer := a.resolve(b)
	var recvs []rdma.RecvOp
	for i := 0; i < 4; i++ {
		recvs = append(recvs, rdma.RecvOp{Local: b.addr(uint64(i) << 20), Length: 1 << 20, Context: uint64(50 + i)})
	}
	recvs[3].Length = 10
	n, err := b.d.PostRecvs(recvs)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	sends := []rdma.SendOp{
		{Local: a.addr(0), Length: 5, Peer: peer, Context: 1},
		{Local: a.addr(100), Length: ipc.MaxMessage, Peer: peer, Context: 2},
		{Local: a.addr(7), Length: 0, Peer: peer, Context: 3},
		{Local: a.addr(0), Length: 11, Peer: peer, Context: 4},
		{Local: a.addr(0), Length: ipc.MaxMessage + 1, Peer: peer, Context: 5},
	}
	posted := 0
	pump(t, 10*time.Second, func() bool {
		if posted < len(sends) {
			n, err := a.d.PostSends(sends[posted:])
			require.NoError(t, err)
			posted += n
		}
		return len(a.byCtx) == len(sends) && len(b.recvs) == 4
	}, a, b)
	for ctx, errno := range map[uint64]int32{1: 0, 2: 0, 3: 0, 4: 0, 5: 90} {
		require.Equal(t, errno, a.byCtx[ctx].Errno, "send %d", ctx)
	}
	want := []struct {
		ctx, n uint64
		errno  int32
	}{{50, 5, 0}, {51, ipc.MaxMessage, 0}, {52, 0, 0}, {53, 11, 90}}
	for i, w := range want {
		got := b.recvs[i]
		require.Equal(t, w.ctx, got.Context)
		require.Equal(t, w.n, got.Length)
		require.Equal(t, w.errno, got.Errno)
	}
	require.Equal(t, a.buf.Bytes()[:5], b.buf.Bytes()[:5])
	require.True(t, bytes.Equal(a.buf.Bytes()[100:100+ipc.MaxMessage], b.buf.Bytes()[1<<20:1<<20+ipc.MaxMessage]))

	// Nobody receives: the ring fills and the sender is told to wait.
	big := rdma.SendOp{Local: a.addr(0), Length: 300 << 10, Peer: peer, Context: 9}
	busy := false
	for i := 0; i < 5 && !busy; i++ {
		n, err := a.d.PostSends([]rdma.SendOp{big})
		require.NoError(t, err)
		busy = n == 0
	}
	require.True(t, busy, "a full message ring makes PostSends return 0")
}

// TestNoLeaks: domains opened, connected both ways, written through and
// closed leave no descriptor, mapping, registration or goroutine behind.
func TestNoLeaks(t *testing.T) {
	cycle := func() {
		a, err := ipc.Open()
		require.NoError(t, err)
		b, err := ipc.Open()
		require.NoError(t, err)
		buf, err := fabric.AllocHost(1 << 20)
		require.NoError(t, err)
		ka, err := a.RegisterMemory(buf.Span(), rdma.AccessRemoteWrite)
		require.NoError(t, err)
		kb, err := b.RegisterMemory(buf.Span(), rdma.AccessRemoteWrite)
		require.NoError(t, err)
		pa, err := a.ResolvePeer(b.Address())
		require.NoError(t, err)
		pb, err := b.ResolvePeer(a.Address())
		require.NoError(t, err)
		_, err = a.PostWrites([]rdma.WriteOp{{Local: uint64(buf.Addr()), Length: 64, Remote: 4096, RemoteKey: kb.Remote, Peer: pa, Context: 1}})
		require.NoError(t, err)
		_, err = b.PostWrites([]rdma.WriteOp{{Local: uint64(buf.Addr()), Length: 64, Remote: 8192, RemoteKey: ka.Remote, Peer: pb, Context: 1}})
		require.NoError(t, err)
		evs := make([]rdma.Event, 8)
		got := 0
		deadline := time.Now().Add(10 * time.Second)
		for got < 2 && time.Now().Before(deadline) {
			for _, d := range []*ipc.Domain{a, b} {
				n, err := d.Poll(evs)
				require.NoError(t, err)
				for _, ev := range evs[:n] {
					require.Zero(t, ev.Errno)
					got++
				}
			}
			runtime.Gosched()
		}
		require.Equal(t, 2, got)
		require.NoError(t, a.UnregisterMemory(ka))
		require.NoError(t, b.UnregisterMemory(kb))
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
		require.NoError(t, buf.Free())
		require.NoError(t, a.Close(), "second Close")
	}
	cycle() // warm up lazily created runtime state
	fds, goroutines, maps := openFDs(t), testutil.SnapshotGoroutines(), ipcMaps(t)
	for i := 0; i < 5; i++ {
		cycle()
	}
	require.Zero(t, ipc.LiveMappings())
	require.Zero(t, ipc.LiveRegistrations())
	require.Equal(t, fds, openFDs(t), "descriptors")
	require.Equal(t, maps, ipcMaps(t), "connection page mappings")
	goroutines.Check(t)
}

// TestBadInput: registrations and addresses ipc cannot serve are refused
// with typed errors.
func TestBadInput(t *testing.T) {
	d, err := ipc.Open()
	require.NoError(t, err)
	defer d.Close()
	anon := make([]byte, 8192) // Go heap: never registered remote-writable
	_, err = d.RegisterMemory(rdma.MemorySpan{Addr: fabricAddr(anon), Len: 8192, Device: rdma.HostDevice}, rdma.AccessRemoteWrite)
	require.ErrorIs(t, err, rdma.ErrNotSupported)
	_, err = d.RegisterMemory(rdma.MemorySpan{Addr: 4096, Len: 4096, Device: rdma.CUDADevice(0)}, rdma.AccessLocal)
	require.ErrorIs(t, err, rdma.ErrNotSupported)
	k, err := d.RegisterMemory(rdma.MemorySpan{Addr: fabricAddr(anon), Len: 8192, Device: rdma.HostDevice}, rdma.AccessLocal)
	require.NoError(t, err, "local-only memory may be anything")
	require.NoError(t, d.UnregisterMemory(k))
	require.ErrorIs(t, d.UnregisterMemory(rdma.MemoryKeys{Remote: 99}), rdma.ErrUnknownRegion)

	other, err := rdma.AddressFromRaw([]byte("not an ipc address"))
	require.NoError(t, err)
	_, err = d.ResolvePeer(other)
	require.ErrorIs(t, err, rdma.ErrInvalidArgument)
	gone, err := ipc.Open()
	require.NoError(t, err)
	addr := gone.Address()
	require.NoError(t, gone.Close())
	_, err = d.ResolvePeer(addr)
	require.ErrorIs(t, err, rdma.ErrPeerLost, "a closed endpoint")
	require.True(t, errors.Is(err, rdma.ErrPeerLost))
	raw := addr.Raw()
	raw[2] ^= 0xff // another host's boot id
	far, err := rdma.AddressFromRaw(raw)
	require.NoError(t, err)
	_, err = d.ResolvePeer(far)
	require.ErrorIs(t, err, rdma.ErrNotSupported)

	require.NoError(t, d.Close())
	_, err = d.PostWrites([]rdma.WriteOp{{}})
	require.ErrorIs(t, err, rdma.ErrClosed)
	_, err = d.RegisterMemory(rdma.MemorySpan{Addr: 4096, Len: 1, Device: rdma.HostDevice}, rdma.AccessLocal)
	require.ErrorIs(t, err, rdma.ErrClosed)
}

// TestSegmentsShared: endpoints of one process writing into the same
// region map it once; the mapping goes with the last of them.
func TestSegmentsShared(t *testing.T) {
	a1, a2, b := openSide(t, 1<<20), openSide(t, 1<<20), openSide(t, 1<<20)
	extra, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	defer extra.Free()
	k, err := b.d.RegisterMemory(extra.Span(), rdma.AccessRemoteWrite)
	require.NoError(t, err)
	base := ipc.LiveMappings()
	for _, a := range []*side{a1, a2} {
		peer := a.resolve(b)
		a.post(rdma.WriteOp{Local: a.addr(0), Length: 4096, Remote: 8192, RemoteKey: k.Remote, Peer: peer, Context: 1})
		pump(t, 10*time.Second, func() bool { return len(a.byCtx) == 1 }, a, b)
		require.Zero(t, a.byCtx[1].Errno)
	}
	// Both ends of the two connections map their page in this process.
	require.Equal(t, base+4+1, ipc.LiveMappings(), "four connection page mappings, one region mapping")
	require.NoError(t, b.d.UnregisterMemory(k))
	require.Equal(t, base+4, ipc.LiveMappings(), "the region's mapping went with its last user")
}

// TestWriteToSelf: an endpoint can be its own peer (an engine writing into
// its own memory through the transport).
func TestWriteToSelf(t *testing.T) {
	a := openSide(t, 1<<20)
	fill(a.buf.Bytes()[:4096], 5)
	self := a.resolve(a)
	a.post(a.write(self, a, 0, 4096, 1, 99))
	a.post(rdma.WriteOp{Local: a.addr(0), Length: 4096, Remote: 8192, RemoteKey: a.keys.Remote, Peer: self,
		Context: 2, Imm: 100, Flags: rdma.WriteHasImm})
	pump(t, 10*time.Second, func() bool { return len(a.byCtx) == 2 && len(a.imms) == 2 }, a)
	require.Zero(t, a.byCtx[1].Errno)
	require.Zero(t, a.byCtx[2].Errno)
	require.Equal(t, a.buf.Bytes()[:4096], a.buf.Bytes()[8192:8192+4096])
	require.ElementsMatch(t, []uint32{99, 100}, a.imms)
}

// TestWriteAfterControlTimeout: a connection set up longer ago than the
// control timeout still carries writes. The deadline of the blocking
// hello write used to stay on the connection, so the worker's first map
// request after it failed and closed the connection: the target was
// reported gone (errno 104) with both ends alive, as with a large buffer
// that took seconds to prepare before the first write.
func TestWriteAfterControlTimeout(t *testing.T) {
	defer ipc.SetCtlTimeout(200 * time.Millisecond)()
	a, b := openSide(t, 1<<20), openSide(t, 1<<20)
	fill(a.buf.Bytes(), 9)
	peer := a.resolve(b)
	a.post(rdma.WriteOp{Peer: peer, Context: 1, Imm: 5, Flags: rdma.WriteHasImm}) // connects, maps nothing
	pump(t, 10*time.Second, func() bool { return len(a.byCtx) == 1 && len(b.imms) == 1 }, a, b)
	time.Sleep(400 * time.Millisecond)       // past the hello's deadline
	a.post(a.write(peer, b, 0, 1<<20, 2, 6)) // the first map request
	pump(t, 10*time.Second, func() bool { return len(a.byCtx) == 2 && len(b.imms) == 2 }, a, b)
	require.Zero(t, a.byCtx[2].Errno, "write after the control timeout: %v", a.d.DescribeError(a.byCtx[2]))
	require.NoError(t, a.d.CheckPeer(peer))
	require.True(t, bytes.Equal(a.buf.Bytes(), b.buf.Bytes()), "bytes differ")
}

// TestPeerClosedInOrder: a target that closes its domain says so first:
// its initiator reports it closed (rdma.ProviderError.PeerClosed, still
// rdma.ErrPeerLost, so its operations fail), not gone with errno 104.
func TestPeerClosedInOrder(t *testing.T) {
	a := openSide(t, 1<<20)
	d, err := ipc.Open()
	require.NoError(t, err)
	peer, err := a.d.ResolvePeer(d.Address())
	require.NoError(t, err)
	a.post(rdma.WriteOp{Peer: peer, Context: 1, Imm: 5, Flags: rdma.WriteHasImm})
	events := make([]rdma.Event, 8)
	pump(t, 10*time.Second, func() bool {
		_, err := d.Poll(events)
		require.NoError(t, err)
		return len(a.byCtx) == 1
	}, a)
	require.Zero(t, a.byCtx[1].Errno)
	require.NoError(t, d.Close())
	pump(t, 10*time.Second, func() bool { return a.d.CheckPeer(peer) != nil }, a)
	err = a.d.CheckPeer(peer)
	var pe *rdma.ProviderError
	require.ErrorAs(t, err, &pe)
	require.True(t, pe.PeerClosed, "%v", err)
	require.ErrorIs(t, err, rdma.ErrPeerLost)
	require.Contains(t, err.Error(), "closed its domain")

	a.post(rdma.WriteOp{Peer: peer, Context: 2, Imm: 6, Flags: rdma.WriteHasImm})
	pump(t, 10*time.Second, func() bool { return len(a.byCtx) == 2 }, a)
	werr := a.d.DescribeError(a.byCtx[2])
	require.ErrorAs(t, werr, &pe)
	require.True(t, pe.PeerClosed, "%v", werr)
	require.ErrorIs(t, werr, rdma.ErrPeerLost)
}
