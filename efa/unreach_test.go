//go:build cgo

package efa

import (
	"errors"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// TestUnreachablePeer writes to an endpoint that has been closed. Every
// write must end exactly once: refused with a timeout error (tcp;ofi_rxm
// answers EAGAIN for as long as it cannot connect), or completed with an
// error event; shm refuses the address itself (a stale descriptor).
func TestUnreachablePeer(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		infos, err := Domains(tr.name, rdma.DomainOptions{Node: tr.node})
		if err != nil {
			testutil.SkipIfNotSupported(t, "libfabric", err)
		}
		a, err := Open(infos[0], rdma.DomainOptions{Node: tr.node, Instance: 800, HandshakeTimeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		gone := openTest(t, tr)
		addr := gone.Address()
		dst := register(t, gone, 4096, rdma.AccessRemoteWrite)
		if err := gone.Close(); err != nil {
			t.Fatal(err)
		}
		peer, err := a.ResolvePeer(addr)
		if err != nil {
			if !errors.Is(err, rdma.ErrInvalidArgument) && !errors.Is(err, rdma.ErrStaleDescriptor) {
				t.Fatalf("untyped error %v", err)
			}
			t.Logf("%s: resolving a closed peer fails at once: %v", tr.name, err)
			return
		}
		src := register(t, a, 4096, rdma.AccessLocal)
		ops := make([]rdma.WriteOp, 4)
		for i := range ops {
			ops[i] = write(src, 0, dst, 0, 64, peer, uint64(i))
			ops[i].Flags = rdma.WriteHasImm
		}
		ended := map[uint64]int{}
		rest := ops
		evs := make([]rdma.Event, 16)
		start := time.Now()
		for (len(rest) > 0 || len(ended) < len(ops)) && time.Since(start) < 10*time.Second {
			if len(rest) > 0 {
				n, err := a.PostWrites(rest)
				rest = rest[n:]
				if err != nil {
					if !errors.Is(err, rdma.ErrTimeout) || !errors.Is(err, rdma.ErrProvider) {
						t.Fatalf("post error %v is not a provider timeout", err)
					}
					ended[rest[0].Context]++
					rest = rest[1:] // what the engine does: fail ops[n], go on
				}
			}
			n, err := a.Poll(evs)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs[:n] {
				if ev.Errno == 0 {
					t.Errorf("write to a closed peer succeeded: %+v", ev)
				}
				ended[ev.Context]++
			}
		}
		if len(ended) < len(ops) {
			t.Fatalf("%d of %d writes to a closed peer never ended", len(ops)-len(ended), len(ops))
		}
		for c, k := range ended {
			if k != 1 {
				t.Errorf("op %d ended %d times", c, k)
			}
		}
		t.Logf("%s: all %d writes failed after %v", tr.name, len(ops), time.Since(start).Round(time.Millisecond))
	})
}
