package verbs

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/testutil"

	"golang.org/x/sys/unix"
)

func openFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestNoLeaks opens, connects, uses and closes domains repeatedly: file
// descriptors and goroutines come back to where they were.
func TestNoLeaks(t *testing.T) {
	infos := requireDevices(t, 1)
	round := func() {
		t.Run("round", func(t *testing.T) {
			a := openT(t, infos[0], rdma.DomainOptions{}, 1<<16)
			b := openT(t, infos[0], rdma.DomainOptions{}, 1<<16)
			p := a.resolve(b)
			postAllWrites(t, a, []rdma.WriteOp{{Remote: uint64(addrOf(b.buf)), RemoteKey: b.keys.Remote, Peer: p,
				Context: 1, Imm: 1, Flags: rdma.WriteHasImm}}, b)
			pump(t, 10*time.Second, func() bool { return len(a.byCtx) == 1 && len(b.imms) == 1 }, a, b)
			if _, err := b.PostRecvs([]rdma.RecvOp{{Local: uint64(addrOf(b.buf)), Length: 64, LocalDesc: b.keys.Local, Context: 1}}); err != nil {
				t.Fatal(err)
			}
		})
	}
	round() // the first round loads the provider library and opens its fds
	fds, gs := openFDs(t), testutil.SnapshotGoroutines()
	for range 3 {
		round()
	}
	if got := openFDs(t); got != fds {
		t.Fatalf("open fds %d -> %d", fds, got)
	}
	// A domain starts no goroutine.
	gs.Check(t)
}

// TestDataPathAllocs: posting writes and polling completions allocate
// nothing once the peer is connected.
func TestDataPathAllocs(t *testing.T) {
	infos := requireDevices(t, 1)
	a := openT(t, infos[0], rdma.DomainOptions{}, 1<<16)
	b := openT(t, infos[0], rdma.DomainOptions{}, 1<<16)
	p := a.resolve(b)
	pump(t, 10*time.Second, func() bool { return a.hs.phase(p) == hsEstablished }, a, b)
	ops := make([]rdma.WriteOp, 8)
	for i := range ops {
		ops[i] = rdma.WriteOp{Local: uint64(addrOf(a.buf)), Length: 64, LocalDesc: a.keys.Local,
			Remote: uint64(addrOf(b.buf)), RemoteKey: b.keys.Remote, Peer: p, Imm: 1, Flags: rdma.WriteHasImm}
	}
	ev := make([]rdma.Event, 64)
	allocs := testing.AllocsPerRun(50, func() {
		left := ops
		for len(left) > 0 {
			n, err := a.PostWrites(left)
			if err != nil {
				t.Fatal(err)
			}
			left = left[n:]
			a.Poll(ev)
			b.Poll(ev)
		}
		for range 100 {
			a.Poll(ev)
			b.Poll(ev)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per batch of 8 writes", allocs)
	}
}

// BenchmarkWrite measures one domain writing into another through the
// provider alone (no engine): writes with immediate, at most 256 in
// flight, waiting at the end for every completion and every immediate. Figures on
// Soft-RoCE in a TCG VM say nothing about hardware; they show the
// provider's own costs and catch regressions.
func BenchmarkWrite(b *testing.B) {
	for _, size := range []int{64, 4096, 65536, 1 << 20} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) { benchWrite(b, size) })
	}
}

func benchWrite(b *testing.B, size int) {
	infos := requireDevices(b, 1)
	const window = 256
	a := openT(b, infos[0], rdma.DomainOptions{}, size)
	c := openT(b, infos[0], rdma.DomainOptions{}, size)
	p := a.resolve(c)
	pump(b, 10*time.Second, func() bool { return a.hs.phase(p) == hsEstablished }, a, c)
	ops := make([]rdma.WriteOp, 1)
	for i := range ops {
		ops[i] = rdma.WriteOp{Local: uint64(addrOf(a.buf)), Length: uint64(size), LocalDesc: a.keys.Local,
			Remote: uint64(addrOf(c.buf)), RemoteKey: c.keys.Remote, Peer: p, Imm: 1, Flags: rdma.WriteHasImm}
	}
	ev := make([]rdma.Event, 64)
	var posted, done, imms int
	reap := func() {
		n, _ := a.Poll(ev)
		done += n
		n, _ = c.Poll(ev)
		imms += n
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		for posted-done >= window {
			reap()
		}
		left := ops
		for len(left) > 0 {
			n, err := a.PostWrites(left)
			if err != nil {
				b.Fatal(err)
			}
			left = left[n:]
			posted += n
			if len(left) > 0 {
				reap()
			}
		}
	}
	for done < posted || imms < posted {
		reap()
	}
	b.ReportMetric(float64(posted)/time.Since(start).Seconds(), "writes/s")
}

// TestDmabufFallback registers a span marked as GPU memory with a dma-buf
// fd. rxe cannot register dma-bufs (EOPNOTSUPP), so the domain falls back
// to ibv_reg_mr, which works here because the memory is really host
// memory, and counts the fallback. On a device with dma-buf support this
// fd (a pipe) would be refused instead.
func TestDmabufFallback(t *testing.T) {
	infos := requireDevices(t, 1)
	a := openT(t, infos[0], rdma.DomainOptions{}, 0)
	var fds [2]int
	if err := unix.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	buf := mmapT(t, 8192)
	keys, err := a.RegisterMemory(rdma.MemorySpan{Addr: addrOf(buf), Len: 8192, Device: rdma.CUDADevice(0),
		DmabufFD: fds[0], DmabufOffset: 0}, rdma.AccessRemoteWrite)
	if err != nil {
		if a.Stats().DmabufFallbacks == 0 && errors.Is(err, rdma.ErrProvider) {
			t.Logf("device accepts dma-buf registration and refused the pipe: %v", err)
			return
		}
		t.Fatal(err)
	}
	if a.Stats().DmabufFallbacks != 1 {
		t.Fatalf("registered without a counted fallback: %+v", a.Stats())
	}
	if err := a.UnregisterMemory(keys); err != nil {
		t.Fatal(err)
	}
}
