package verbs

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/testutil"

	"golang.org/x/sys/unix"
)

// requireDevices returns the verbs devices to test on (FERRY_VERBS_DEVICES,
// else every device with an active port). Without any it skips, unless
// FERRY_TEST_REQUIRE lists "verbs", which makes that a failure.
func requireDevices(t testing.TB, n int) []rdma.DomainInfo {
	t.Helper()
	infos, err := Provider{}.Domains("verbs", rdma.DomainOptions{})
	if err == nil && os.Getenv("FERRY_VERBS_DEVICES") != "" {
		want := strings.Split(os.Getenv("FERRY_VERBS_DEVICES"), ",")
		infos = slices.DeleteFunc(infos, func(i rdma.DomainInfo) bool { return !slices.Contains(want, i.Name) })
	}
	if err != nil && !errors.Is(err, rdma.ErrNotSupported) {
		t.Fatalf("listing verbs devices: %v", err)
	}
	if err == nil && len(infos) < n {
		err = fmt.Errorf("found %d", len(infos))
	}
	if err != nil {
		testutil.Skip(t, "verbs", "needs %d verbs device(s) with an active port (make test-verbs runs these on Soft-RoCE in a VM): %v", n, err)
	}
	return infos[:n]
}

// tdom is a domain under test with what it has seen.
type tdom struct {
	*Domain
	t      testing.TB
	events []rdma.Event
	imms   []uint32
	byCtx  map[uint64]rdma.Event
	buf    []byte
	keys   rdma.MemoryKeys
}

func openT(t testing.TB, info rdma.DomainInfo, opts rdma.DomainOptions, bufSize int) *tdom {
	t.Helper()
	d, err := Open(info, opts)
	if err != nil {
		t.Fatalf("open %s: %v", info.Name, err)
	}
	td := &tdom{Domain: d, t: t, byCtx: map[uint64]rdma.Event{}}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if bufSize > 0 {
		td.buf = mmapT(t, bufSize)
		keys, err := d.RegisterMemory(rdma.MemorySpan{Addr: addrOf(td.buf), Len: uint64(len(td.buf)), DmabufFD: -1},
			rdma.AccessRemoteWrite)
		if err != nil {
			t.Fatalf("register: %v", err)
		}
		td.keys = keys
	}
	return td
}

// mmapT returns anonymous memory (never Go heap: the NIC keeps using it).
func mmapT(t testing.TB, n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

func addrOf(b []byte) uintptr { return uintptr(unsafePointer(b)) }

// poll reaps once into the domain's record.
func (d *tdom) poll() {
	var ev [64]rdma.Event
	n, err := d.Poll(ev[:])
	if err != nil {
		d.t.Fatalf("poll: %v", err)
	}
	for _, e := range ev[:n] {
		d.events = append(d.events, e)
		if e.Kind == rdma.EventImm {
			d.imms = append(d.imms, e.Imm)
			continue
		}
		if _, dup := d.byCtx[e.Context]; dup {
			d.t.Errorf("second completion for context %d: %+v", e.Context, e)
		}
		d.byCtx[e.Context] = e
	}
}

// pump polls every domain until done reports true or the timeout passes.
func pump(t testing.TB, timeout time.Duration, done func() bool, doms ...*tdom) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("no progress within %v", timeout)
		}
		for _, d := range doms {
			d.poll()
		}
		time.Sleep(10 * time.Microsecond)
	}
}

// postAllWrites posts ops, polling while the domain pushes back, and
// returns how many times it pushed back.
func postAllWrites(t testing.TB, d *tdom, ops []rdma.WriteOp, others ...*tdom) int {
	t.Helper()
	pushback := 0
	deadline := time.Now().Add(60 * time.Second)
	for len(ops) > 0 {
		n, err := d.PostWrites(ops)
		if err != nil {
			t.Fatalf("post writes: %v", err)
		}
		ops = ops[n:]
		if len(ops) > 0 {
			pushback++
			if time.Now().After(deadline) {
				t.Fatalf("writes stuck with %d left", len(ops))
			}
			d.poll()
			for _, o := range others {
				o.poll()
			}
		}
	}
	return pushback
}

func (d *tdom) resolve(o *tdom) rdma.PeerID {
	d.t.Helper()
	id, err := d.ResolvePeer(o.Address())
	if err != nil {
		d.t.Fatalf("resolve: %v", err)
	}
	return id
}

func (d *tdom) completedOK(ctx uint64) bool {
	e, ok := d.byCtx[ctx]
	if ok && e.Errno != 0 {
		d.t.Fatalf("context %d failed: %v", ctx, d.DescribeError(e))
	}
	return ok
}
