//go:build cgo

package efa

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/ofi"
)

func TestDomainsAndRegistry(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		c, err := fabric.ChooseTransport(tr.name, rdma.DomainOptions{Node: tr.node})
		if errors.Is(err, rdma.ErrNotSupported) {
			testutil.Skip(t, "libfabric", "provider %s cannot run here: %v", tr.name, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.Provider.Name() != ProviderName || len(c.Domains) == 0 {
			t.Fatalf("choice %+v", c)
		}
		names := map[string]bool{}
		for _, di := range c.Domains {
			if names[di.Name] {
				t.Errorf("domain %q listed twice", di.Name)
			}
			names[di.Name] = true
			if di.Provider != ProviderName || di.Transport != tr.name || di.NUMANode != -1 {
				t.Errorf("domain info %+v", di)
			}
		}
		if tr.node == "127.0.0.1" && (len(c.Domains) != 1 || c.Domains[0].Name != "lo") {
			t.Errorf("pinned to 127.0.0.1 but got %+v", c.Domains)
		}
	})
}

func TestDomainsErrors(t *testing.T) {
	_, err := Domains("no-such-provider", rdma.DomainOptions{})
	if !errors.Is(err, rdma.ErrNotSupported) {
		t.Errorf("unknown provider: %v", err)
	}
	_, err = Domains("", rdma.DomainOptions{})
	if !errors.Is(err, rdma.ErrInvalidArgument) {
		t.Errorf("empty transport: %v", err)
	}
	_, err = Open(rdma.DomainInfo{Transport: "shm", Name: "no-such-domain"}, rdma.DomainOptions{})
	if !errors.Is(err, rdma.ErrNotSupported) {
		t.Errorf("unknown domain: %v", err)
	}
	_, err = Open(rdma.DomainInfo{Transport: "shm", Name: "shm"}, rdma.DomainOptions{QueueDepth: -1})
	if !errors.Is(err, rdma.ErrInvalidArgument) {
		t.Errorf("negative queue depth: %v", err)
	}
}

func TestVersionAndTransports(t *testing.T) {
	v := Version()
	if v == "" || v[0] < '1' {
		t.Fatalf("Version() = %q", v)
	}
	ts, err := Transports()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("libfabric %s (API %s): %v", v, ofi.APIVersion(), ts)
	if len(ts) == 0 {
		testutil.Skip(t, "libfabric", "no libfabric providers on this machine")
	}
}

// TestMultiEndpoint opens n domains per side on the same loopback domain, as
// the engine does to emulate n NICs, and writes from every local endpoint
// to every remote one.
func TestMultiEndpoint(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			forEachTransport(t, func(t *testing.T, tr testTransport) {
				const size = 1 << 16
				var local, remote []*Domain
				var srcs, dsts []region
				for range n {
					a, b := openTest(t, tr), openTest(t, tr)
					local, remote = append(local, a), append(remote, b)
					srcs = append(srcs, register(t, a, size, rdma.AccessLocal))
					dsts = append(dsts, register(t, b, n*size, rdma.AccessRemoteWrite))
				}
				seen := map[rdma.Address]bool{}
				for _, d := range append(local, remote...) {
					if seen[d.Address()] {
						t.Fatalf("two endpoints share address %v", d.Address())
					}
					seen[d.Address()] = true
				}
				doms := append(append([]*Domain{}, local...), remote...)
				imms := map[uint32]bool{}
				writes := 0
				on := func(i int, ev rdma.Event) {
					if ev.Errno != 0 {
						t.Fatalf("domain %d: %v", i, doms[i].DescribeError(ev))
					}
					switch ev.Kind {
					case rdma.EventImm:
						imms[ev.Imm] = true
					case rdma.EventWrite:
						writes++
					}
				}
				for i, a := range local {
					fill(srcs[i].buf, byte(i*16))
					for j, b := range remote {
						peer, err := a.ResolvePeer(b.Address())
						if err != nil {
							t.Fatal(err)
						}
						op := write(srcs[i], 0, dsts[j], uint64(i*size), size, peer, uint64(i*n+j))
						op.Imm, op.Flags = uint32(i<<8|j), rdma.WriteHasImm
						postAll(t, a, []rdma.WriteOp{op}, doms, on)
					}
				}
				pump(t, 20*time.Second, doms, on, func() bool { return writes == n*n && len(imms) == n*n })
				for i := range local {
					for j := range remote {
						if !bytes.Equal(dsts[j].buf[i*size:(i+1)*size], srcs[i].buf) {
							t.Fatalf("endpoint %d -> %d: payload differs", i, j)
						}
					}
				}
			})
		})
	}
}

// TestCloseReleasesShm checks that closing shm endpoints removes the files
// they created in /dev/shm.
func TestCloseReleasesShm(t *testing.T) {
	tr := testTransport{"shm", ""}
	infos, err := Domains(tr.name, rdma.DomainOptions{})
	if errors.Is(err, rdma.ErrNotSupported) {
		testutil.Skip(t, "libfabric", "shm cannot run here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	before := shmFiles(t)
	var doms []*Domain
	for i := range 3 {
		d, err := Open(infos[0], rdma.DomainOptions{Instance: 900 + i})
		if err != nil {
			t.Fatal(err)
		}
		doms = append(doms, d)
	}
	// Exchange a message so every endpoint has mapped its peer's region.
	ra := register(t, doms[0], 4096, rdma.AccessLocal)
	rb := register(t, doms[1], 4096, rdma.AccessRemoteWrite)
	peer, err := doms[0].ResolvePeer(doms[1].Address())
	if err != nil {
		t.Fatal(err)
	}
	var done bool
	op := write(ra, 0, rb, 0, 64, peer, 1)
	postAll(t, doms[0], []rdma.WriteOp{op}, doms, func(int, rdma.Event) { done = true })
	pump(t, 10*time.Second, doms, func(int, rdma.Event) { done = true }, func() bool { return done })
	during := shmFiles(t)
	created := 0
	for f := range during {
		if !before[f] {
			created++
		}
	}
	t.Logf("%d files created in /dev/shm by 3 endpoints", created)
	for _, d := range doms {
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for f := range shmFiles(t) {
		if !before[f] {
			t.Errorf("/dev/shm/%s left behind after Close", f)
		}
	}
}

func TestResolvePeerBadAddress(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		d := openTest(t, tr)
		own := d.Address().Raw()
		bad := [][]byte{
			[]byte("garbage"),
			bytes.Repeat([]byte{0xff}, len(own)),
			append(bytes.Clone(own), 1, 2, 3),
		}
		for _, raw := range bad {
			addr, err := rdma.AddressFromRaw(raw)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.ResolvePeer(addr); !errors.Is(err, rdma.ErrInvalidArgument) {
				t.Errorf("ResolvePeer(%q) = %v, want ErrInvalidArgument", raw, err)
			}
		}
		if _, err := d.ResolvePeer(rdma.Address{}); !errors.Is(err, rdma.ErrInvalidArgument) {
			t.Errorf("ResolvePeer(zero) = %v", err)
		}
		// The same address twice gives the same peer, and self works.
		p1, err := d.ResolvePeer(d.Address())
		if err != nil {
			t.Fatal(err)
		}
		p2, err := d.ResolvePeer(d.Address())
		if err != nil || p1 != p2 {
			t.Fatalf("second resolve: %v, %v != %v", err, p2, p1)
		}
	})
}

func TestRegisterBadSpan(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		d := openTest(t, tr)
		b := hostBuf(t, 4096)
		for _, s := range []rdma.MemorySpan{
			{Addr: 0, Len: 4096},
			{Addr: addrOf(b), Len: 0},
			{Addr: ^uintptr(0) - 10, Len: 4096},
		} {
			if _, err := d.RegisterMemory(s, rdma.AccessLocal); !errors.Is(err, rdma.ErrInvalidArgument) {
				t.Errorf("RegisterMemory(%+v) = %v, want ErrInvalidArgument", s, err)
			}
		}
		if _, err := d.RegisterMemory(rdma.MemorySpan{Addr: addrOf(b), Len: 4096}, rdma.Access(0x80)); !errors.Is(err, rdma.ErrInvalidArgument) {
			t.Errorf("bad access: %v", err)
		}
		gpu := rdma.MemorySpan{Addr: addrOf(b), Len: 4096, Device: rdma.CUDADevice(0), DmabufFD: -1}
		if _, err := d.RegisterMemory(gpu, rdma.AccessRemoteWrite); !errors.Is(err, rdma.ErrNotSupported) {
			t.Errorf("CUDA span on %s = %v, want ErrNotSupported", tr.name, err)
		}
		if err := d.UnregisterMemory(rdma.MemoryKeys{Handle: 12345}); !errors.Is(err, rdma.ErrUnknownRegion) {
			t.Errorf("unregister unknown: %v", err)
		}
		k, err := d.RegisterMemory(rdma.MemorySpan{Addr: addrOf(b), Len: 4096}, rdma.AccessLocal)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.UnregisterMemory(k); err != nil {
			t.Fatal(err)
		}
		if err := d.UnregisterMemory(k); !errors.Is(err, rdma.ErrUnknownRegion) {
			t.Errorf("double unregister: %v", err)
		}
	})
}

func TestClosedDomain(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		d := openTest(t, tr)
		register(t, d, 4096, rdma.AccessRemoteWrite) // left for Close to release
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if err := d.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := d.PostWrites(make([]rdma.WriteOp, 1)); !errors.Is(err, rdma.ErrClosed) {
			t.Errorf("PostWrites: %v", err)
		}
		if _, err := d.PostSends(make([]rdma.SendOp, 1)); !errors.Is(err, rdma.ErrClosed) {
			t.Errorf("PostSends: %v", err)
		}
		if _, err := d.PostRecvs(make([]rdma.RecvOp, 1)); !errors.Is(err, rdma.ErrClosed) {
			t.Errorf("PostRecvs: %v", err)
		}
		if _, err := d.Poll(make([]rdma.Event, 1)); !errors.Is(err, rdma.ErrClosed) {
			t.Errorf("Poll: %v", err)
		}
		if _, err := d.ResolvePeer(d.Address()); !errors.Is(err, rdma.ErrClosed) {
			t.Errorf("ResolvePeer: %v", err)
		}
		b := hostBuf(t, 4096)
		if _, err := d.RegisterMemory(rdma.MemorySpan{Addr: addrOf(b), Len: 4096}, 0); !errors.Is(err, rdma.ErrClosed) {
			t.Errorf("RegisterMemory: %v", err)
		}
	})
}

// TestCloseReleasesFDs opens, uses and closes domains and checks that the
// process has no more file descriptors than before.
func TestCloseReleasesFDs(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		// Warm up once: libfabric opens a few descriptors it keeps for the
		// life of the process (provider initialisation).
		cycle := func() {
			infos, err := Domains(tr.name, rdma.DomainOptions{Node: tr.node})
			if err != nil {
				testutil.SkipIfNotSupported(t, "libfabric", err)
			}
			a, err := Open(infos[0], rdma.DomainOptions{Node: tr.node, Instance: 700})
			if err != nil {
				t.Fatal(err)
			}
			b, err := Open(infos[0], rdma.DomainOptions{Node: tr.node, Instance: 701})
			if err != nil {
				t.Fatal(err)
			}
			src, dst := register(t, a, 4096, rdma.AccessLocal), register(t, b, 4096, rdma.AccessRemoteWrite)
			peer, err := a.ResolvePeer(b.Address())
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			doms := []*Domain{a, b}
			postAll(t, a, []rdma.WriteOp{write(src, 0, dst, 0, 64, peer, 1)}, doms, func(int, rdma.Event) { n++ })
			pump(t, 10*time.Second, doms, func(int, rdma.Event) { n++ }, func() bool { return n >= 1 })
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		}
		cycle()
		before := countFDs(t)
		for range 5 {
			cycle()
		}
		if after := countFDs(t); after > before {
			t.Errorf("%d file descriptors before, %d after 5 open/close cycles", before, after)
		}
	})
}

func countFDs(tb testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}
