package a2a_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/workload"
)

// TestSendTransfersFromSegments checks that the writes a device backend
// lists from its count row's segment starts alone, on a planner that never
// planned the send (a device backend's worker), are PlanSend's, whatever
// ranks are active.
func TestSendTransfersFromSegments(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	for it := 0; it < 200; it++ {
		cfg := workload.RandomConfig(rng, 16)
		cfg.Rank = rng.IntN(cfg.WorldSize)
		p, err := a2a.NewPlanner(cfg)
		if err != nil {
			t.Fatal(err)
		}
		worker, err := a2a.NewPlanner(cfg)
		if err != nil {
			t.Fatal(err)
		}
		active := workload.RandomActive(rng, cfg.WorldSize, cfg.Rank)
		if err := p.SetActive(active); err != nil {
			t.Fatal(err)
		}
		if err := worker.SetActive(active); err != nil {
			t.Fatal(err)
		}
		l := p.Layout()
		g := workload.RandomGroups(rng, l, rng.IntN(3) == 0)[l.Group(cfg.Rank)]
		if err := p.PlanSend(g.Indices, g.Tokens); err != nil {
			t.Fatal(err)
		}
		sp := p.Send()
		// Into slices holding something already: only appended entries count.
		eager, over := worker.SendTransfers(sp.Segments, []a2a.Transfer{{Peer: -1}}, nil)
		if fmt.Sprint(eager[1:]) != fmt.Sprint(sp.Eager) || fmt.Sprint(over) != fmt.Sprint(sp.Overflow) {
			t.Fatalf("config %+v active %v: from segments %v %v, PlanSend %v %v", cfg, active, eager[1:], over, sp.Eager, sp.Overflow)
		}
	}
}
