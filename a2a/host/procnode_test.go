//go:build linux

package host_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
)

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd here: %v", err)
	}
	return len(ents)
}

// TestProcessNodeShares maps two members' memfds in one process: a store
// through one member's view is seen through the other's, and closing both
// leaves no descriptor open.
func TestProcessNodeShares(t *testing.T) {
	before := openFDs(t)
	cfg := a2a.Config{WorldSize: 2, NVLinkSize: 2, MaxTokens: 4, Hidden: 8, DispatchType: a2a.BF16,
		CombineType: a2a.BF16, Experts: 4, ExpertsPerToken: 2}
	x := a2atest.NewExchange(2)
	sends := make([][][]byte, 2)
	recvs := make([][][]byte, 2)
	nodes := make([]*host.ProcessNode, 2)
	errs := make([]error, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range 2 {
		c := cfg
		c.Rank = r
		n, err := host.NewProcessNode(c, x.Member(r))
		if err != nil {
			t.Fatal(err)
		}
		nodes[r] = n
		wg.Add(1)
		go func() {
			defer wg.Done()
			sends[r], recvs[r], errs[r] = n.Share(ctx, 8192, 4096)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	sends[0][0][100] = 42 // rank 0 writes its own send buffer
	recvs[1][0][7] = 9    // rank 1 writes rank 0's receive buffer
	if sends[1][0][100] != 42 || recvs[0][0][7] != 9 || len(sends[1][0]) != 8192 || len(recvs[0][1]) != 4096 {
		t.Fatal("the members do not see each other's stores")
	}
	for _, n := range nodes {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if after := openFDs(t); after > before {
		t.Fatalf("%d descriptors open after closing, %d before", after, before)
	}
}

// TestProcessNodeReshare: member 1 of a two-member domain restarts (a new
// ProcessNode that allocates alone) while member 0 stays: after a reshare
// each sees the other's stores through the new buffers, member 0 no
// longer maps the old ones, and closing everything leaves no descriptor
// open. A reshare whose peer never comes ends with the context, as a
// timeout.
func TestProcessNodeReshare(t *testing.T) {
	before := openFDs(t)
	cfg := a2a.Config{WorldSize: 2, NVLinkSize: 2, MaxTokens: 4, Hidden: 8, DispatchType: a2a.BF16,
		CombineType: a2a.BF16, Experts: 4, ExpertsPerToken: 2}
	x := a2atest.NewExchange(2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes := make([]*host.ProcessNode, 3) // the third is member 1 restarted
	for r := range nodes {
		c := cfg
		c.Rank = min(r, 1)
		n, err := host.NewProcessNode(c, x.Member(c.Rank))
		if err != nil {
			t.Fatal(err)
		}
		nodes[r] = n
	}
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			if _, _, err := nodes[r].Share(ctx, 8192, 4096); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	require(t, nodes[1].Close() == nil, "close the old member 1")
	if _, _, err := nodes[2].Alloc(8192, 4096); err != nil {
		t.Fatal(err)
	}
	member := []*host.ProcessNode{nodes[0], nodes[2]}
	offers := make([][]byte, 2)
	for i, n := range member {
		var err error
		offers[i], err = n.Offer(1)
		require(t, err == nil, "offer: %v", err)
	}
	sends := make([][][]byte, 2)
	errs := make([]error, 2)
	for i, n := range member {
		wg.Go(func() { sends[i], _, errs[i] = n.Reshare(ctx, 1, offers) })
	}
	wg.Wait()
	require(t, errs[0] == nil && errs[1] == nil, "reshare: %v %v", errs[0], errs[1])
	sends[1][1][10] = 5 // the new member 1 writes its own send buffer
	sends[0][0][20] = 6 // member 0 writes its own
	require(t, sends[0][1][10] == 5 && sends[1][0][20] == 6, "the members do not see each other's new buffers")
	// Two buffers each, mapped by their owner and by the other member:
	// member 0 holds nothing more of the old member 1.
	maps, err := os.ReadFile("/proc/self/maps")
	require(t, err == nil, "%v", err)
	require(t, bytes.Count(maps, []byte("/memfd:ferry-a2a-")) == 8, "node buffer mappings:\n%s", maps)

	// Member 0 reshares again, but member 1 never comes.
	offers[0], _ = nodes[0].Offer(3)
	offers[1], _ = nodes[2].Offer(3)
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	_, _, err = nodes[0].Reshare(short, 3, offers)
	require(t, errors.Is(err, a2a.ErrTimeout), "reshare without the peer: %v, want a timeout", err)
	_, _, _ = nodes[2].Reshare(ctx, 3, nil) // withdraws its offer
	for _, n := range nodes {
		require(t, n.Close() == nil, "close")
	}
	if after := openFDs(t); after > before {
		t.Fatalf("%d descriptors open after closing, %d before", after, before)
	}
}
