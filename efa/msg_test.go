//go:build cgo

package efa

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// TestSendRecv exchanges two-sided messages both ways and checks lengths,
// contexts and payloads.
func TestSendRecv(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		a, b := openTest(t, tr), openTest(t, tr)
		ra := register(t, a, 1<<16, rdma.AccessLocal)
		rb := register(t, b, 1<<16, rdma.AccessLocal)
		pab, err := a.ResolvePeer(b.Address())
		if err != nil {
			t.Fatal(err)
		}
		pba, err := b.ResolvePeer(a.Address())
		if err != nil {
			t.Fatal(err)
		}
		// b receives into its second half; a sends 3 messages from its first.
		var recvs []rdma.RecvOp
		for i := range 4 {
			recvs = append(recvs, rdma.RecvOp{Local: rb.local(uint64(32768 + i*4096)), Length: 4096,
				LocalDesc: rb.keys.Local, Context: uint64(10 + i)})
		}
		if n, err := b.PostRecvs(recvs); n != len(recvs) || err != nil {
			t.Fatalf("post recvs: %d, %v", n, err)
		}
		fill(ra.buf, 5)
		sends := []rdma.SendOp{
			{Local: ra.local(0), Length: 100, LocalDesc: ra.keys.Local, Peer: pab, Context: 1},
			{Local: ra.local(100), Length: 4096, LocalDesc: ra.keys.Local, Peer: pab, Context: 2},
			{Local: ra.local(0), Length: 0, LocalDesc: ra.keys.Local, Peer: pab, Context: 3},
		}
		got := map[uint64]rdma.Event{}
		doms := []*Domain{a, b}
		on := func(i int, ev rdma.Event) {
			if ev.Errno != 0 {
				t.Fatalf("domain %d: %v", i, doms[i].DescribeError(ev))
			}
			got[ev.Context] = ev
		}
		posted := 0
		pump(t, 10*time.Second, doms, on, func() bool {
			if posted < len(sends) {
				n, err := a.PostSends(sends[posted:])
				if err != nil {
					t.Fatal(err)
				}
				posted += n
			}
			return len(got) == 6
		})
		for ctx, want := range map[uint64]rdma.EventKind{1: rdma.EventSend, 2: rdma.EventSend, 3: rdma.EventSend,
			10: rdma.EventRecv, 11: rdma.EventRecv, 12: rdma.EventRecv} {
			if got[ctx].Kind != want {
				t.Fatalf("context %d: %+v, want %v", ctx, got[ctx], want)
			}
		}
		// Messages between one pair arrive in order on these providers.
		if got[10].Length != 100 || got[11].Length != 4096 || got[12].Length != 0 {
			t.Fatalf("received lengths %d %d %d", got[10].Length, got[11].Length, got[12].Length)
		}
		if !bytes.Equal(rb.buf[32768:32768+100], ra.buf[:100]) || !bytes.Equal(rb.buf[36864:36864+4096], ra.buf[100:4196]) {
			t.Fatal("payload differs")
		}
		// And back, into the receive still posted... on a.
		if n, err := a.PostRecvs([]rdma.RecvOp{{Local: ra.local(60000), Length: 64, LocalDesc: ra.keys.Local, Context: 20}}); n != 1 || err != nil {
			t.Fatalf("post recv: %d %v", n, err)
		}
		clear(got)
		back := []rdma.SendOp{{Local: rb.local(0), Length: 64, LocalDesc: rb.keys.Local, Peer: pba, Context: 21}}
		pump(t, 10*time.Second, doms, on, func() bool {
			if len(back) > 0 {
				n, err := b.PostSends(back)
				if err != nil {
					t.Fatal(err)
				}
				back = back[n:]
			}
			return got[20].Kind == rdma.EventRecv && got[21].Kind == rdma.EventSend
		})
	})
}

// TestErrorCompletion makes a real error completion, a message longer than
// the receive buffer, and checks that it comes back as an event with the
// op's context and turns into a *rdma.ProviderError.
func TestErrorCompletion(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		a, b := openTest(t, tr), openTest(t, tr)
		ra := register(t, a, 8192, rdma.AccessLocal)
		rb := register(t, b, 8192, rdma.AccessLocal)
		peer, err := a.ResolvePeer(b.Address())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.PostRecvs([]rdma.RecvOp{{Local: rb.local(0), Length: 16, LocalDesc: rb.keys.Local, Context: 0x77 << 56}}); err != nil {
			t.Fatal(err)
		}
		sends := []rdma.SendOp{{Local: ra.local(0), Length: 4000, LocalDesc: ra.keys.Local, Peer: peer, Context: 5}}
		var errEv rdma.Event
		var sent bool
		doms := []*Domain{a, b}
		pump(t, 10*time.Second, doms, func(i int, ev rdma.Event) {
			switch {
			case i == 1 && ev.Errno != 0:
				errEv = ev
			case i == 0 && ev.Context == 5:
				sent = true
			}
		}, func() bool {
			if len(sends) > 0 {
				n, err := a.PostSends(sends)
				if err != nil {
					t.Fatal(err)
				}
				sends = sends[n:]
			}
			return errEv.Errno != 0 && sent
		})
		if errEv.Context != 0x77<<56 {
			t.Errorf("error event context %#x, want the recv's", errEv.Context)
		}
		err = b.DescribeError(errEv)
		var pe *rdma.ProviderError
		if !errors.Is(err, rdma.ErrProvider) || !errors.As(err, &pe) || pe.Msg == "" {
			t.Fatalf("DescribeError = %v", err)
		}
		t.Logf("%s: %v (kind %v)", tr.name, err, errEv.Kind)
		if b.DescribeError(rdma.Event{Kind: rdma.EventRecv}) != nil {
			t.Error("DescribeError of a successful event is not nil")
		}
	})
}
