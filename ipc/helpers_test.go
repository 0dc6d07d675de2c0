package ipc_test

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/ipc"
)

// side is one domain with a registered remote-writable buffer, driven by
// the test goroutine the way a worker drives it.
type side struct {
	t      testing.TB
	d      *ipc.Domain
	buf    *fabric.HostBuffer
	keys   rdma.MemoryKeys
	events []rdma.Event
	byCtx  map[uint64]rdma.Event
	imms   []uint32
	recvs  []rdma.Event
}

func openSide(t testing.TB, size int) *side {
	t.Helper()
	d, err := ipc.Open()
	require.NoError(t, err)
	s := &side{t: t, d: d, events: make([]rdma.Event, 64), byCtx: map[uint64]rdma.Event{}}
	s.buf, err = fabric.AllocHost(size)
	require.NoError(t, err)
	s.keys, err = d.RegisterMemory(s.buf.Span(), rdma.AccessRemoteWrite)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = d.UnregisterMemory(s.keys)
		require.NoError(t, d.Close())
		require.NoError(t, s.buf.Free())
	})
	return s
}

func (s *side) resolve(o *side) rdma.PeerID {
	s.t.Helper()
	p, err := s.d.ResolvePeer(o.d.Address())
	require.NoError(s.t, err)
	return p
}

func (s *side) poll() {
	n, err := s.d.Poll(s.events)
	require.NoError(s.t, err)
	for _, ev := range s.events[:n] {
		switch ev.Kind {
		case rdma.EventImm:
			s.imms = append(s.imms, ev.Imm)
		case rdma.EventRecv:
			s.recvs = append(s.recvs, ev)
		default:
			_, dup := s.byCtx[ev.Context]
			require.False(s.t, dup, "context %d completed twice", ev.Context)
			s.byCtx[ev.Context] = ev
		}
	}
}

// pump polls every side until cond holds, failing after timeout.
func pump(t testing.TB, timeout time.Duration, cond func() bool, sides ...*side) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not reached within %v", timeout)
		}
		for _, s := range sides {
			s.poll()
		}
		runtime.Gosched()
	}
}

func (s *side) post(ops ...rdma.WriteOp) {
	s.t.Helper()
	n, err := s.d.PostWrites(ops)
	require.NoError(s.t, err)
	require.Equal(s.t, len(ops), n, "ipc accepts every write")
}

func (s *side) addr(off uint64) uint64 { return uint64(s.buf.Addr()) + off }

// write builds a write of n bytes from s at off to peer's region at off.
func (s *side) write(peer rdma.PeerID, to *side, off, n uint64, ctx uint64, imm uint32) rdma.WriteOp {
	return rdma.WriteOp{Local: s.addr(off), Length: n, Remote: off, RemoteKey: to.keys.Remote, Peer: peer,
		Context: ctx, Imm: imm, Flags: rdma.WriteHasImm}
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>11)
	}
}

// openFDs counts this process's descriptors.
func openFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

// ipcMaps counts this process's mappings of ipc connection pages.
func ipcMaps(t testing.TB) int {
	b, err := os.ReadFile("/proc/self/maps")
	require.NoError(t, err)
	return strings.Count(string(b), "ferry-ipc-conn")
}

func fabricAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
