package bench_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/bench"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/fabric"
	_ "github.com/ferryrdma/ferry/internal/memfabric"
)

// localGroup is an in-process job: reusable all-gathers and barriers.
type localGroup struct {
	mu    sync.Mutex
	cond  *sync.Cond
	n     int
	gen   int
	count int
	data  [][]byte
	out   [][]byte
}

func newLocalGroup(n int) *localGroup {
	g := &localGroup{n: n, data: make([][]byte, n)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

type rankOf struct {
	g *localGroup
	r int
}

func (m rankOf) Rank() int      { return m.r }
func (m rankOf) WorldSize() int { return m.g.n }
func (m rankOf) Barrier(ctx context.Context) error {
	_, err := m.AllGather(ctx, nil)
	return err
}

func (m rankOf) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	gen := g.gen
	g.data[m.r] = data
	g.count++
	if g.count == g.n {
		g.out = append([][]byte(nil), g.data...)
		g.count = 0
		g.gen++
		g.cond.Broadcast()
		return g.out, nil
	}
	for g.gen == gen {
		g.cond.Wait()
	}
	return g.out, nil
}

func runLocal(t *testing.T, spec bench.Spec) []*bench.Report {
	t.Helper()
	l, err := spec.Config.Layout()
	if err != nil {
		t.Fatal(err)
	}
	W := l.WorldSize
	g := newLocalGroup(W)
	nodes := make([]*host.LocalNode, l.Nodes)
	for i := range nodes {
		nodes[i] = host.NewLocalNode(l.NVLinkSize)
	}
	reps := make([]*bench.Report, W)
	errs := make([]error, W)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range W {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[r], errs[r] = bench.Run(ctx, spec, rankOf{g, r}, bench.Options{Node: nodes[l.Node(r)].Member(r % l.NVLinkSize)})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return reps
}

func TestRunInProcess(t *testing.T) {
	spec := bench.Spec{
		Config: a2a.Config{WorldSize: 4, NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 16, Hidden: 64, Scales: 4,
			DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 16, ExpertsPerToken: 4},
		Transport: "mem", Iters: 6, Warmup: 2, Check: true, CheckIters: 2, Seed: 5,
	}
	reps := runLocal(t, spec)
	r := reps[0]
	if !r.Checked || r.Samples != 4*6 || r.Provider == "" {
		t.Fatalf("report: %+v", r)
	}
	for name, p := range map[string]bench.Phase{"dispatch": r.Dispatch, "combine": r.Combine} {
		s := p.Both
		if !(s.Min > 0 && s.Min <= s.P50 && s.P50 <= s.P99 && s.P99 <= s.Max && s.Mean > 0) || p.BandwidthGBps <= 0 {
			t.Fatalf("%s stats: %+v", name, p)
		}
	}
	if r.Dispatch.NominalBytes != 16*4*(64+16) || r.Combine.NominalBytes != 16*4*128 {
		t.Fatalf("nominal bytes %d %d", r.Dispatch.NominalBytes, r.Combine.NominalBytes)
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js, &back); err != nil || back["dispatch"] == nil || back["combine"] == nil {
		t.Fatalf("json %s: %v", js, err)
	}
}

func TestRunRejects(t *testing.T) {
	ctx := context.Background()
	cfg := a2a.Config{WorldSize: 1, MaxTokens: 1, Hidden: 1, DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 1, ExpertsPerToken: 1}
	g := rankOf{newLocalGroup(1), 0}
	if _, err := bench.Run(ctx, bench.Spec{Config: cfg, Backend: "cuda", Iters: 1}, g, bench.Options{}); !errors.Is(err, fabric.ErrNotSupported) {
		t.Fatalf("cuda: %v", err)
	}
	if _, err := bench.Run(ctx, bench.Spec{Config: cfg, Iters: 0}, g, bench.Options{}); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("no iterations: %v", err)
	}
	cfg.WorldSize = 2
	if _, err := bench.Run(ctx, bench.Spec{Config: cfg, Iters: 1}, g, bench.Options{}); !errors.Is(err, a2a.ErrInvalidConfig) {
		t.Fatalf("world mismatch: %v", err)
	}
}
