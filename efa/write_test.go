//go:build cgo

package efa

import (
	"bytes"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric"
)

func TestSingleWriteImm(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		a, b := openTest(t, tr), openTest(t, tr)
		t.Logf("%s: provider %s, mr_mode %#x, addr %d bytes %q", tr.name, a.ProviderName(), a.MRMode(), len(a.Address().Raw()), a.Address().Raw())
		src := register(t, a, 1<<20, fabric.AccessLocal)
		dst := register(t, b, 1<<20, fabric.AccessRemoteWrite)
		fill(src.buf, 3)
		peer, err := a.ResolvePeer(b.Address())
		if err != nil {
			t.Fatal(err)
		}
		op := write(src, 100, dst, 200, 300000, peer, 0xabc)
		op.Imm, op.Flags = 0xdeadbeef, fabric.WriteHasImm
		var got []fabric.Event
		doms := []*Domain{a, b}
		postAll(t, a, []fabric.WriteOp{op}, doms, nil)
		pump(t, 10*time.Second, doms, func(i int, ev fabric.Event) {
			if ev.Errno != 0 {
				t.Fatalf("domain %d: %v", i, doms[i].DescribeError(ev))
			}
			got = append(got, ev)
		}, func() bool { return len(got) == 2 })
		var w, imm fabric.Event
		for _, ev := range got {
			switch ev.Kind {
			case fabric.EventWrite:
				w = ev
			case fabric.EventImm:
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
