//go:build cgo

package efa

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/testutil"

	"golang.org/x/sys/unix"
)

// testTransport is one libfabric provider the tests run on, pinned to
// loopback.
type testTransport struct {
	name string
	node string
}

var testTransports = []testTransport{
	{"tcp;ofi_rxm", "127.0.0.1"},
	{"shm", ""},
}

// forEachTransport runs f as a subtest per transport.
func forEachTransport(t *testing.T, f func(t *testing.T, tr testTransport)) {
	for _, tr := range testTransports {
		t.Run(strings.ReplaceAll(tr.name, ";", "_"), func(t *testing.T) { f(t, tr) })
	}
}

var instanceSeq int

// openTest opens one domain of tr, skipping the test when the provider is
// missing here and closing the domain at cleanup.
func openTest(tb testing.TB, tr testTransport) *Domain {
	tb.Helper()
	opts := rdma.DomainOptions{Node: tr.node}
	infos, err := Domains(tr.name, opts)
	if err != nil {
		if errors.Is(err, rdma.ErrNotSupported) {
			testutil.Skip(tb, "libfabric", "provider %s cannot run here: %v", tr.name, err)
		}
		tb.Fatalf("Domains(%s): %v", tr.name, err)
	}
	instanceSeq++
	opts.Instance = instanceSeq
	d, err := Open(infos[0], opts)
	if err != nil {
		tb.Fatalf("Open(%s): %v", tr.name, err)
	}
	tb.Cleanup(func() {
		if err := d.Close(); err != nil {
			tb.Errorf("close %s: %v", tr.name, err)
		}
	})
	return d
}

// hostBuf is mmap'd memory, never Go heap, unmapped at cleanup.
func hostBuf(tb testing.TB, size int) []byte {
	tb.Helper()
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		tb.Fatalf("mmap %d: %v", size, err)
	}
	tb.Cleanup(func() { unix.Munmap(b) })
	return b
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// region is a registered host buffer.
type region struct {
	buf  []byte
	keys rdma.MemoryKeys
}

func register(tb testing.TB, d *Domain, size int, access rdma.Access) region {
	tb.Helper()
	b := hostBuf(tb, size)
	k, err := d.RegisterMemory(rdma.MemorySpan{Addr: addrOf(b), Len: uint64(size), DmabufFD: -1}, access)
	if err != nil {
		tb.Fatalf("register %d bytes: %v", size, err)
	}
	tb.Cleanup(func() {
		if d.ep != nil {
			if err := d.UnregisterMemory(k); err != nil {
				tb.Errorf("unregister: %v", err)
			}
		}
	})
	return region{buf: b, keys: k}
}

// remote is the address a peer uses for offset off of r.
func (r region) remote(off uint64) uint64 {
	if r.keys.Mode == rdma.AddrVirtual {
		return uint64(addrOf(r.buf)) + off
	}
	return off
}

func (r region) local(off uint64) uint64 { return uint64(addrOf(r.buf)) + off }

// write builds a write of n bytes from src+soff to dst+doff.
func write(src region, soff uint64, dst region, doff, n uint64, peer rdma.PeerID, ctx uint64) rdma.WriteOp {
	return rdma.WriteOp{
		Local: src.local(soff), Length: n, LocalDesc: src.keys.Local,
		Remote: dst.remote(doff), RemoteKey: dst.keys.Remote, Peer: peer, Context: ctx,
	}
}

// pump polls every domain until done returns true, handing each event to
// on with the index of its domain. It fails the test after timeout.
func pump(tb testing.TB, timeout time.Duration, doms []*Domain, on func(i int, ev rdma.Event), done func() bool) {
	tb.Helper()
	evs := make([]rdma.Event, 64)
	deadline := time.Now().Add(timeout)
	for spins := 0; !done(); spins++ {
		for i, d := range doms {
			n, err := d.Poll(evs)
			if err != nil {
				tb.Fatalf("poll domain %d: %v", i, err)
			}
			for _, ev := range evs[:n] {
				on(i, ev)
			}
		}
		if spins&255 == 0 && time.Now().After(deadline) {
			tb.Fatalf("no progress after %v", timeout)
		}
	}
}

// postAll posts every op on d, polling all domains whenever d is busy, and
// calls on for events seen meanwhile.
func postAll(tb testing.TB, d *Domain, ops []rdma.WriteOp, doms []*Domain, on func(i int, ev rdma.Event)) (eagain int) {
	tb.Helper()
	posted := 0
	pump(tb, 30*time.Second, doms, on, func() bool {
		if posted < len(ops) {
			n, err := d.PostWrites(ops[posted:])
			if err != nil {
				tb.Fatalf("post write %d: %v", posted+n, err)
			}
			posted += n
			if posted < len(ops) {
				eagain++
			}
		}
		return posted == len(ops)
	})
	return eagain
}

// shmFiles lists /dev/shm.
func shmFiles(tb testing.TB) map[string]bool {
	tb.Helper()
	ents, err := os.ReadDir("/dev/shm")
	if err != nil {
		tb.Skipf("no /dev/shm: %v", err)
	}
	m := map[string]bool{}
	for _, e := range ents {
		m[e.Name()] = true
	}
	return m
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i*7) + seed
	}
}
