//go:build cgo

package efa

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ofi"
)

func TestSingleWriteImm(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		a, b := openTest(t, tr), openTest(t, tr)
		t.Logf("%s: provider %s, mr_mode %#x, addr %d bytes %q", tr.name, a.ProviderName(), a.MRMode(), len(a.Address().Raw()), a.Address().Raw())
		src := register(t, a, 1<<20, rdma.AccessLocal)
		dst := register(t, b, 1<<20, rdma.AccessRemoteWrite)
		fill(src.buf, 3)
		peer, err := a.ResolvePeer(b.Address())
		if err != nil {
			t.Fatal(err)
		}
		op := write(src, 100, dst, 200, 300000, peer, 0xabc)
		op.Imm, op.Flags = 0xdeadbeef, rdma.WriteHasImm
		var got []rdma.Event
		doms := []*Domain{a, b}
		postAll(t, a, []rdma.WriteOp{op}, doms, nil)
		pump(t, 10*time.Second, doms, func(i int, ev rdma.Event) {
			if ev.Errno != 0 {
				t.Fatalf("domain %d: %v", i, doms[i].DescribeError(ev))
			}
			got = append(got, ev)
		}, func() bool { return len(got) == 2 })
		var w, imm rdma.Event
		for _, ev := range got {
			switch ev.Kind {
			case rdma.EventWrite:
				w = ev
			case rdma.EventImm:
				imm = ev
			}
		}
		if w.Context != 0xabc || imm.Imm != 0xdeadbeef {
			t.Fatalf("events %+v", got)
		}
		if !bytes.Equal(dst.buf[200:200+300000], src.buf[100:100+300000]) {
			t.Fatal("payload differs")
		}
		if dst.buf[199] != 0 || dst.buf[200+300000] != 0 {
			t.Fatal("write spilled outside its range")
		}
	})
}

// TestImmOnly sends zero-byte writes that carry only an immediate,
// including ones aimed exactly at the end of the region.
func TestImmOnly(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		a, b := openTest(t, tr), openTest(t, tr)
		const size = 8192
		src := register(t, a, size, rdma.AccessLocal)
		dst := register(t, b, size, rdma.AccessRemoteWrite)
		peer, err := a.ResolvePeer(b.Address())
		if err != nil {
			t.Fatal(err)
		}
		var ops []rdma.WriteOp
		for i, off := range []uint64{0, 17, size - 1, size} {
			op := write(src, size, dst, off, 0, peer, uint64(100+i))
			op.Imm, op.Flags = uint32(7000+i), rdma.WriteHasImm
			ops = append(ops, op)
		}
		// A real write ending exactly at the end of the region, then a
		// zero-length one right behind it.
		fill(src.buf, 9)
		tail := write(src, 0, dst, size-64, 64, peer, 200)
		tail.Imm, tail.Flags = 8000, rdma.WriteHasImm
		ops = append(ops, tail)

		imms, writes := map[uint32]bool{}, map[uint64]bool{}
		doms := []*Domain{a, b}
		on := func(i int, ev rdma.Event) {
			if ev.Errno != 0 {
				t.Fatalf("domain %d: %v", i, doms[i].DescribeError(ev))
			}
			switch {
			case i == 0 && ev.Kind == rdma.EventWrite:
				writes[ev.Context] = true
			case i == 1 && ev.Kind == rdma.EventImm:
				imms[ev.Imm] = true
			default:
				t.Fatalf("domain %d: unexpected %+v", i, ev)
			}
		}
		postAll(t, a, ops, doms, on)
		pump(t, 10*time.Second, doms, on, func() bool { return len(imms) == len(ops) && len(writes) == len(ops) })
		for i := range 4 {
			if !imms[uint32(7000+i)] || !writes[uint64(100+i)] {
				t.Fatalf("imm-only write %d missing: imms %v writes %v", i, imms, writes)
			}
		}
		if !bytes.Equal(dst.buf[size-64:], src.buf[:64]) || dst.buf[size-65] != 0 {
			t.Fatal("tail write landed wrong")
		}
	})
}

// TestManyPages posts 5000 page writes to a shuffled set of target pages in
// one batch, more than either provider takes at once, so posting runs into
// EAGAIN and has to be resumed after polls, then checks every byte.
func TestManyPages(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		a, b := openTest(t, tr), openTest(t, tr)
		const pages, page = 5000, 1024
		src := register(t, a, pages*page, rdma.AccessLocal)
		dst := register(t, b, pages*page, rdma.AccessRemoteWrite)
		fill(src.buf, 1)
		for i := range pages {
			src.buf[i*page] = byte(i)
			src.buf[i*page+1] = byte(i >> 8)
		}
		peer, err := a.ResolvePeer(b.Address())
		if err != nil {
			t.Fatal(err)
		}
		perm := rand.New(rand.NewPCG(3, 4)).Perm(pages)
		ops := make([]rdma.WriteOp, pages)
		for i := range ops {
			ops[i] = write(src, uint64(i*page), dst, uint64(perm[i]*page), page, peer, uint64(i))
			ops[i].Imm, ops[i].Flags = uint32(i), rdma.WriteHasImm
		}
		done := make([]bool, pages)
		var nw, ni int
		doms := []*Domain{a, b}
		on := func(i int, ev rdma.Event) {
			if ev.Errno != 0 {
				t.Fatalf("domain %d: %v", i, doms[i].DescribeError(ev))
			}
			switch ev.Kind {
			case rdma.EventWrite:
				if done[ev.Context] {
					t.Fatalf("write %d completed twice", ev.Context)
				}
				done[ev.Context] = true
				nw++
			case rdma.EventImm:
				ni++
			}
		}
		eagain := postAll(t, a, ops, doms, on)
		pump(t, 30*time.Second, doms, on, func() bool { return nw == pages && ni == pages })
		t.Logf("%s: posting stopped at a busy provider %d times", tr.name, eagain)
		if eagain == 0 {
			t.Errorf("%d writes were all accepted at once; expected back-pressure", pages)
		}
		for i := range pages {
			s, d := src.buf[i*page:(i+1)*page], dst.buf[perm[i]*page:(perm[i]+1)*page]
			if !bytes.Equal(s, d) {
				t.Fatalf("page %d (target page %d) differs", i, perm[i])
			}
		}
	})
}

// TestAddrMode checks the addressing each provider negotiates: tcp;ofi_rxm
// uses offsets and requested keys, shm virtual addresses.
func TestAddrMode(t *testing.T) {
	want := map[string]rdma.AddrMode{"tcp;ofi_rxm": rdma.AddrOffset, "shm": rdma.AddrVirtual}
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		d := openTest(t, tr)
		r1 := register(t, d, 4096, rdma.AccessRemoteWrite)
		r2 := register(t, d, 4096, rdma.AccessRemoteWrite)
		if r1.keys.Mode != want[tr.name] || d.AddrMode() != want[tr.name] {
			t.Errorf("mode %v, want %v", r1.keys.Mode, want[tr.name])
		}
		if d.MRMode()&ofi.MRProvKey == 0 && r1.keys.Remote == r2.keys.Remote {
			t.Errorf("requested keys collide: %d", r1.keys.Remote)
		}
	})
}

// TestPollSmallArray polls into arrays smaller than libfabric's read batch
// and checks that no completion is lost or repeated.
func TestPollSmallArray(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		a, b := openTest(t, tr), openTest(t, tr)
		src := register(t, a, 4096, rdma.AccessLocal)
		dst := register(t, b, 4096, rdma.AccessRemoteWrite)
		peer, err := a.ResolvePeer(b.Address())
		if err != nil {
			t.Fatal(err)
		}
		const n = 300
		ops := make([]rdma.WriteOp, n)
		for i := range ops {
			ops[i] = write(src, 0, dst, uint64(i%64)*64, 64, peer, uint64(i))
			ops[i].Imm, ops[i].Flags = uint32(i), rdma.WriteHasImm
		}
		writes, imms := make([]int, n), make([]int, n)
		evs := make([]rdma.Event, 3)
		posted, seen := 0, 0
		deadline := time.Now().Add(20 * time.Second)
		for seen < 2*n {
			if posted < n {
				k, err := a.PostWrites(ops[posted:])
				if err != nil {
					t.Fatal(err)
				}
				posted += k
			}
			for i, d := range []*Domain{a, b} {
				k, err := d.Poll(evs)
				if err != nil {
					t.Fatal(err)
				}
				if k > len(evs) {
					t.Fatalf("Poll stored %d events in an array of %d", k, len(evs))
				}
				for _, ev := range evs[:k] {
					if ev.Errno != 0 {
						t.Fatal(d.DescribeError(ev))
					}
					if i == 0 {
						writes[ev.Context]++
					} else {
						imms[ev.Imm]++
					}
					seen++
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("saw %d of %d events", seen, 2*n)
			}
		}
		for i := range n {
			if writes[i] != 1 || imms[i] != 1 {
				t.Fatalf("op %d: %d write and %d imm completions", i, writes[i], imms[i])
			}
		}
	})
}
