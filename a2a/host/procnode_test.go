//go:build linux

package host_test

import (
	"context"
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
