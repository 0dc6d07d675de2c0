package emulated_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/cudabackend/emulated"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	"github.com/ferryrdma/ferry/a2a/workload"
	"github.com/ferryrdma/ferry/fabric"
)

func allActive(w int) []bool {
	a := make([]bool, w)
	for q := range a {
		a[q] = true
	}
	return a
}

// TestEmuMasked runs the kernels through membership changes: a random
// set of active ranks, then another (ranks leave and come back), then
// everyone, each for iterations whose every rank's results must equal
// the masked oracle bit for bit (dropped rows reported, their combine
// slots left out), buffers poisoned first.
func TestEmuMasked(t *testing.T) {
	n, maxW := 4, 4
	if testing.Short() {
		n = 2
	}
	if s := os.Getenv("FERRY_A2A_EMU_RANDOM"); s != "" {
		// A longer sweep (make test-a2a-full): a third as many masked
		// worlds as random ones, up to 8 ranks.
		v, _ := strconv.Atoi(s)
		n, maxW = max(n, v/3), 8
	}
	shapes := []a2a.Config{
		{WorldSize: 4, NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 8, Hidden: 40, Scales: 3, DispatchType: a2a.FP8,
			CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 3, PrivateTokens: 2},
		{WorldSize: 4, NVLinkSize: 4, ReplicaSize: 2, MaxTokens: 6, Hidden: 20, DispatchType: a2a.BF16,
			CombineType: a2a.FP32, Experts: 9, ExpertsPerToken: 4, PrivateTokens: 1, ExpertPadding: 16},
	}
	rng := rand.New(rand.NewPCG(43, 9))
	for i := 0; i < n; i++ {
		cfg := workload.RandomConfig(rng, maxW)
		if i < len(shapes) {
			cfg = shapes[i]
		}
		seed := rng.Uint64()
		masks := [][]bool{workload.RandomActive(rng, cfg.WorldSize, -1), workload.RandomActive(rng, cfg.WorldSize, -1),
			allActive(cfg.WorldSize)}
		name := fmt.Sprintf("%d/W%d_S%d_D%d_E%d_K%d", i, cfg.WorldSize, cfg.NVLinkSize, cfg.ReplicaSize, cfg.Experts,
			cfg.ExpertsPerToken)
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, cfg, "mem", cudabackend.Options{})
			for gen, active := range masks {
				a2atest.SetActive(t, w.ctxs, uint32(gen+1), active, nil)
				a2atest.Run(t, cfg, &a2atest.World{Contexts: w.ctxs, Active: active, BeforeIteration: w.poison,
					Timeout: time.Minute}, seed+uint64(gen), 2)
				t.Logf("generation %d, active %v: equal to the masked oracle", gen+1, active)
			}
		})
	}
}

// TestEmuLostRankCarryOn: a rank of the CUDA backend dies (its engine
// closes under it) mid-run; the survivors' next iteration fails within
// the backend's timeout, naming it as lost where a wait of the worker
// saw it; they take a membership without it and run on, equal to the
// masked oracle.
func TestEmuLostRankCarryOn(t *testing.T) {
	const lost, timeout = 2, 3 * time.Second
	cfg := a2a.Config{WorldSize: 4, NVLinkSize: 2, MaxTokens: 6, Hidden: 24, Scales: 2, DispatchType: a2a.FP8,
		CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 3, PrivateTokens: 2}
	w := newWorld(t, cfg, "mem", cudabackend.Options{Timeout: timeout})
	a2atest.Run(t, cfg, &a2atest.World{Contexts: w.ctxs, Timeout: time.Minute}, 51, 1)

	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := w.engines[lost].Close(cctx); err != nil {
		t.Fatalf("close the lost rank's engine: %v", err)
	}
	cancel()
	// Its backend, stranded on a closed engine, closes meanwhile (it
	// waits a while for transfers the engine will not finish).
	stranded := make(chan struct{})
	go func(c *a2a.Context) {
		defer close(stranded)
		_ = c.Close()
	}(w.ctxs[lost])
	defer func() { <-stranded }()
	w.ctxs[lost], w.engines[lost] = nil, nil

	l := w.ctxs[0].Layout()
	in, err := workload.NewIteration(rand.New(rand.NewPCG(52, 1)), cfg, l)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	errs := make([]error, cfg.WorldSize)
	var wg sync.WaitGroup
	for r, c := range w.ctxs {
		if r == lost {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := &in.Groups[l.Group(r)]
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dout := a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), X: make([]byte, l.OutputRows*l.TokenBytes),
				Scales: make([]float32, l.OutputRows*l.Scales)}
			errs[r] = c.Dispatch(ctx, &a2a.DispatchInput{Tokens: g.Tokens, X: g.X, Scales: g.Scales, Indices: g.Indices}, &dout)
			if errs[r] == nil {
				cout := a2a.CombineOutput{Out: make([]byte, g.Tokens*l.CombineBytes), Weights: g.Weights}
				errs[r] = c.Combine(ctx, &a2a.CombineInput{Y: make([]byte, l.OutputRows*l.CombineBytes)}, &cout)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	named := 0
	for r, err := range errs {
		if r == lost {
			continue
		}
		if !errors.Is(err, a2a.ErrTimeout) && !errors.Is(err, a2a.ErrPeerLost) {
			t.Fatalf("rank %d: %v, want a timeout or the rank lost", r, err)
		}
		var re *a2a.RankError
		if errors.As(err, &re) {
			if re.Rank != lost {
				t.Fatalf("rank %d: names rank %d, lost %d: %v", r, re.Rank, lost, err)
			}
			named++
		}
		t.Logf("rank %d: %v", r, err)
	}
	if took > timeout+2*time.Second {
		t.Fatalf("the survivors' iteration failed after %v, timeout %v", took, timeout)
	}
	t.Logf("the survivors' iteration failed after %v (%d of 3 errors name rank %d)", took, named, lost)

	active := []bool{true, true, false, true}
	a2atest.SetActive(t, w.ctxs, 1, active, nil)
	a2atest.Run(t, cfg, &a2atest.World{Contexts: w.ctxs, Active: active, BeforeIteration: w.poison, Timeout: time.Minute}, 53, 3)
}

// TestEmuLostRankRejoins: a lost rank of the CUDA backend restarts (a new
// engine, new buffers, a backend built to join) and comes back through an
// explicit membership change with a descriptor exchange among the
// members; every rank then runs on, equal to the oracle.
func TestEmuLostRankRejoins(t *testing.T) {
	const lost, timeout = 1, 3 * time.Second
	cfg := a2a.Config{WorldSize: 3, MaxTokens: 6, Hidden: 24, Scales: 2, DispatchType: a2a.FP8,
		CombineType: a2a.BF16, Experts: 7, ExpertsPerToken: 2, PrivateTokens: 2}
	w := newWorld(t, cfg, "mem", cudabackend.Options{Timeout: timeout})
	a2atest.Run(t, cfg, &a2atest.World{Contexts: w.ctxs, Timeout: time.Minute}, 61, 1)
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if err := w.engines[lost].Close(cctx); err != nil {
		t.Fatalf("close the lost rank's engine: %v", err)
	}
	cancel()
	stranded := make(chan struct{})
	go func(c *a2a.Context) {
		defer close(stranded)
		_ = c.Close()
	}(w.ctxs[lost])
	defer func() { <-stranded }()
	w.ctxs[lost], w.engines[lost] = nil, nil

	without := []bool{true, false, true}
	a2atest.SetActive(t, w.ctxs, 1, without, nil)
	a2atest.Run(t, cfg, &a2atest.World{Contexts: w.ctxs, Active: without, BeforeIteration: w.poison, Timeout: time.Minute}, 62, 2)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := fabric.Open(ctx, fabric.Config{Transport: "mem", LivenessInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	w.engines[lost] = e // closed by the world's cleanup
	c := cfg
	c.Rank = lost
	dev := emulated.NewDevice()
	member := cudabackend.NewLocalNode(dev, 1).Member(0)
	b, err := cudabackend.New(ctx, c, cudabackend.Options{Engine: e, Device: dev, Node: member, Timeout: timeout, Join: true})
	if err != nil {
		t.Fatalf("restarted backend: %v", err)
	}
	w.members[lost] = member
	if w.ctxs[lost], err = a2a.New(c, b); err != nil {
		t.Fatal(err)
	}
	all := allActive(3)
	x := a2atest.NewExchange(3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r, cx := range w.ctxs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = cx.SetActiveRanks(ctx, a2a.Membership{Generation: 2, Active: all, Exchange: x.Member(r)})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("rejoin: %v", err)
	}
	a2atest.Run(t, cfg, &a2atest.World{Contexts: w.ctxs, Active: all, BeforeIteration: w.poison, Timeout: time.Minute}, 63, 3)
}
