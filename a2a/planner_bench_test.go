package a2a_test

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/ferryrdma/ferry/a2a"
)

// decodeWorld is the shape the planner must plan in well under 20 µs per
// iteration: 64 ranks, 8 per NVLink domain, DeepSeek-V3-like decode.
func decodeConfig(rank int) a2a.Config {
	return a2a.Config{
		WorldSize: 64, Rank: rank, NVLinkSize: 8, NICsPerGPU: 2,
		MaxTokens: 128, Hidden: 7168, Scales: 56, DispatchType: a2a.FP8, CombineType: a2a.BF16,
		Experts: 256, ExpertsPerToken: 8,
	}
}

// routeAll draws top-K routings for every group and returns them with the
// count table they produce.
func routeAll(rng *rand.Rand, l *a2a.Layout, m int) ([][]uint32, []uint32) {
	K, E, RW := l.ExpertsPerToken, l.Experts, l.RowWords
	idx := make([][]uint32, l.Groups)
	table := make([]uint32, l.Groups*RW)
	for h := range idx {
		idx[h] = make([]uint32, m*K)
		for t := 0; t < m; t++ {
			for k, e := range rng.Perm(E)[:K] {
				idx[h][t*K+k] = uint32(e)
			}
		}
		// Build the row the way a sender does.
		cfg := l.Config
		cfg.Rank = h * l.ReplicaSize
		p, err := a2a.NewPlanner(cfg)
		if err != nil {
			panic(err)
		}
		if err := p.PlanSend(idx[h], m); err != nil {
			panic(err)
		}
		copy(table[h*RW:], p.Send().Row)
	}
	return idx, table
}

func BenchmarkPlannerDecodeW64(b *testing.B) {
	for _, rank := range []int{0, 37} {
		b.Run(map[int]string{0: "rank0", 37: "rank37"}[rank], func(b *testing.B) {
			p, err := a2a.NewPlanner(decodeConfig(rank))
			if err != nil {
				b.Fatal(err)
			}
			l := p.Layout()
			rng := rand.New(rand.NewPCG(1, 2))
			const variants = 8
			idx := make([][]uint32, variants)
			tables := make([][]uint32, variants)
			for v := range idx {
				all, table := routeAll(rng, l, l.MaxTokens)
				idx[v], tables[v] = all[l.Group(rank)], table
			}
			b.ReportAllocs()
			// Keep the loop on one thread so its CPU clock covers it all.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			i := 0
			cpu0 := threadCPU()
			for b.Loop() {
				v := i % variants
				i++
				if err := p.PlanSend(idx[v], l.MaxTokens); err != nil {
					b.Fatal(err)
				}
				if err := p.PlanRecv(tables[v]); err != nil {
					b.Fatal(err)
				}
			}
			if cpu := threadCPU() - cpu0; cpu > 0 {
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu_ns/op")
			}
			b.ReportMetric(float64(p.Recv().Copies), "copies")
			b.ReportMetric(float64(len(p.Recv().Runs)), "runs")
		})
	}
}

func TestPlannerAllocations(t *testing.T) {
	p, err := a2a.NewPlanner(decodeConfig(5))
	if err != nil {
		t.Fatal(err)
	}
	l := p.Layout()
	all, table := routeAll(rand.New(rand.NewPCG(3, 4)), l, 100)
	allocs := testing.AllocsPerRun(20, func() {
		if err := p.PlanSend(all[l.Group(5)], 100); err != nil {
			t.Fatal(err)
		}
		if err := p.PlanRecv(table); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("planning allocates %v times per iteration", allocs)
	}
}
