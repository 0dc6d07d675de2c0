//go:build cgo

package efa

import (
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// TestDataPathAllocs checks that posting and polling allocate nothing.
func TestDataPathAllocs(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		a, b := openTest(t, tr), openTest(t, tr)
		src := register(t, a, 4096, rdma.AccessLocal)
		dst := register(t, b, 4096, rdma.AccessRemoteWrite)
		peer, err := a.ResolvePeer(b.Address())
		if err != nil {
			t.Fatal(err)
		}
		ops := make([]rdma.WriteOp, 8)
		for i := range ops {
			ops[i] = write(src, 0, dst, uint64(i*64), 64, peer, uint64(i))
			ops[i].Flags = rdma.WriteHasImm
		}
		// Connect first: tcp's first writes wait for the connection.
		doms := []*Domain{a, b}
		n := 0
		postAll(t, a, ops[:1], doms, func(int, rdma.Event) { n++ })
		pump(t, 10*time.Second, doms, func(int, rdma.Event) { n++ }, func() bool { return n >= 2 })
		evs := make([]rdma.Event, 64)
		allocs := testing.AllocsPerRun(200, func() {
			k, _ := a.PostWrites(ops)
			for done := 0; done < 2*k; {
				m, _ := a.Poll(evs)
				done += m
				m, _ = b.Poll(evs)
				done += m
			}
		})
		if allocs != 0 {
			t.Errorf("PostWrites+Poll allocate %.1f times per batch", allocs)
		}
	})
}
