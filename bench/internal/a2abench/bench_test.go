package a2abench_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/bench/internal/a2abench"
	"github.com/ferryrdma/ferry/fabric"
	_ "github.com/ferryrdma/ferry/memfabric"
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

func runLocal(t *testing.T, spec a2abench.Spec, opt a2abench.Options) []*a2abench.Report {
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
	reps := make([]*a2abench.Report, W)
	errs := make([]error, W)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range W {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := a2abench.Options{Node: nodes[l.Node(r)].Member(r % l.NVLinkSize)}
			if r == 0 {
				o.OnStart, o.OnCase = opt.OnStart, opt.OnCase
			}
			reps[r], errs[r] = a2abench.Run(ctx, spec, rankOf{g, r}, o)
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

// Two cases (4 and 16 tokens) on four ranks in one process: every case
// is timed on every rank, checked against the oracle, and handed to OnCase
// as it completes, after OnStart.
func TestRunInProcess(t *testing.T) {
	spec := a2abench.Spec{
		Config: a2a.Config{WorldSize: 4, NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 16, Hidden: 64, Scales: 4,
			DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 16, ExpertsPerToken: 4},
		Transport: "mem", Tokens: []int{4, 16}, Iters: 6, Warmup: 2, Check: true, CheckIters: 2, Seed: 5,
	}
	var events []string
	opt := a2abench.Options{
		OnStart: func(r *a2abench.Report) { events = append(events, fmt.Sprintf("start %d", len(r.Cases))) },
		OnCase:  func(c a2abench.Case) { events = append(events, fmt.Sprintf("case %d", c.Tokens)) },
	}
	reps := runLocal(t, spec, opt)
	if want := []string{"start 0", "case 4", "case 16"}; !slices.Equal(events, want) {
		t.Fatalf("events %q, want %q", events, want)
	}
	r := reps[0]
	if r.CheckIters != 2 || r.Provider == "" || r.MaxTokens != 16 || len(r.Cases) != 2 {
		t.Fatalf("report: %+v", r)
	}
	for i, c := range r.Cases {
		T := int64(spec.Tokens[i])
		if c.Tokens != spec.Tokens[i] || len(c.Samples) != 4*6 || !c.Checked || c.CheckError != "" {
			t.Fatalf("case %d: tokens %d, %d samples, checked %v %q", i, c.Tokens, len(c.Samples), c.Checked, c.CheckError)
		}
		if c.NominalBytes(a2abench.Dispatch) != T*4*(64+16) || c.NominalBytes(a2abench.Combine) != T*4*128 {
			t.Fatalf("case %d: nominal bytes %d %d", i, c.DispatchBytes, c.CombineBytes)
		}
		for _, ph := range []string{a2abench.Dispatch, a2abench.Combine} {
			send, recv := c.Halves(ph)
			for k := range send {
				if send[k] <= 0 || recv[k] <= 0 {
					t.Fatalf("case %d %s sample %d: send %v recv %v", i, ph, k, send[k], recv[k])
				}
			}
		}
	}
	if len(reps[1].Cases) != 2 || len(reps[1].Cases[1].Samples) != 4*6 {
		t.Fatal("every rank gets every rank's samples")
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back a2abench.Report
	if err := json.Unmarshal(js, &back); err != nil || len(back.Cases) != 2 || len(back.Cases[0].Samples) != 24 {
		t.Fatalf("json %s: %v", js, err)
	}
}

func TestRunRejects(t *testing.T) {
	ctx := context.Background()
	cfg := a2a.Config{WorldSize: 1, MaxTokens: 1, Hidden: 1, DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 1, ExpertsPerToken: 1}
	g := rankOf{newLocalGroup(1), 0}
	if _, err := a2abench.Run(ctx, a2abench.Spec{Config: cfg, Backend: "gpu", Iters: 1}, g, a2abench.Options{}); !errors.Is(err, fabric.ErrNotSupported) {
		t.Fatalf("unknown backend: %v", err)
	}
	if _, err := a2abench.Run(ctx, a2abench.Spec{Config: cfg, Backend: a2abench.BackendCUDAEmu, Block: 48, Iters: 1}, g, a2abench.Options{}); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("block of 48 threads: %v", err)
	}
	if _, err := a2abench.Run(ctx, a2abench.Spec{Config: cfg, Iters: 0}, g, a2abench.Options{}); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("no iterations: %v", err)
	}
	if _, err := a2abench.Run(ctx, a2abench.Spec{Config: cfg, Iters: 1, Tokens: []int{2}}, g, a2abench.Options{}); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("a case above MaxTokens: %v", err)
	}
	cfg.WorldSize = 2
	if _, err := a2abench.Run(ctx, a2abench.Spec{Config: cfg, Iters: 1}, g, a2abench.Options{}); !errors.Is(err, a2a.ErrInvalidConfig) {
		t.Fatalf("world mismatch: %v", err)
	}
}
