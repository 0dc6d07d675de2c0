package host_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	"github.com/ferryrdma/ferry/a2a/workload"
	_ "github.com/ferryrdma/ferry/efa"
	"github.com/ferryrdma/ferry/fabric"
	_ "github.com/ferryrdma/ferry/ipc"
	_ "github.com/ferryrdma/ferry/memfabric"
)

// world builds W ranks over transport, each with its own engine, and
// closes everything at the end of the test.
func world(t testing.TB, cfg a2a.Config, transport string) []*a2a.Context {
	t.Helper()
	ctxs, _ := worldBackends(t, cfg, transport)
	return ctxs
}

// worldBackends is world, returning each rank's backend too.
func worldBackends(t testing.TB, cfg a2a.Config, transport string) ([]*a2a.Context, []*host.Backend) {
	t.Helper()
	l, err := cfg.Layout()
	if err != nil {
		t.Fatal(err)
	}
	W := cfg.WorldSize
	x := a2atest.NewExchange(W)
	nodes := make([]*host.LocalNode, l.Nodes)
	for n := range nodes {
		nodes[n] = host.NewLocalNode(l.NVLinkSize)
	}
	engines := make([]*fabric.Engine, W)
	ctxs := make([]*a2a.Context, W)
	backends := make([]*host.Backend, W)
	errs := make([]error, W)
	t.Cleanup(func() {
		for _, c := range ctxs {
			if c != nil {
				if err := c.Close(); err != nil {
					t.Errorf("close context: %v", err)
				}
			}
		}
		for _, e := range engines {
			if e != nil {
				cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := e.Close(cctx); err != nil {
					t.Errorf("close engine: %v", err)
				}
				cancel()
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range W {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := fabric.Open(ctx, fabric.Config{Transport: transport, NICs: l.NICsPerGPU, Node: "127.0.0.1",
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				errs[r] = err
				return
			}
			engines[r] = e
			c := cfg
			c.Rank = r
			// Doorbells whatever the CPUs, so that ipc worlds of more ranks
			// than this machine has cores exercise them.
			b, err := host.New(ctx, c, host.Options{Engine: e, Exchange: x.Member(r),
				Node: nodes[l.Node(r)].Member(r % l.NVLinkSize), Doorbells: host.DoorbellsOn})
			if err != nil {
				errs[r] = err
				return
			}
			backends[r] = b
			ctxs[r], errs[r] = a2a.New(c, b)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return ctxs, backends
}

func TestHostOverMemRandom(t *testing.T) {
	n := 24
	if testing.Short() {
		n = 6
	}
	rng := rand.New(rand.NewPCG(31, 7))
	for i := 0; i < n; i++ {
		cfg := workload.RandomConfig(rng, 8)
		seed := rng.Uint64()
		name := fmt.Sprintf("%d/W%d_S%d_D%d_E%d_K%d_T%d_M%d_pad%d_nic%d", i, cfg.WorldSize, cfg.NVLinkSize,
			cfg.ReplicaSize, cfg.Experts, cfg.ExpertsPerToken, cfg.MaxTokens, cfg.PrivateTokens, cfg.ExpertPadding, cfg.NICsPerGPU)
		t.Run(name, func(t *testing.T) {
			ctxs := world(t, cfg, "mem")
			a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs}, seed, 3)
		})
	}
}

// TestHostShapes runs the shapes that exercise every path class at once:
// two domains of two ranks (node push and pull, RDMA eager and overflow),
// replicas across domains, and two NICs.
func TestHostShapes(t *testing.T) {
	for name, cfg := range map[string]a2a.Config{
		"all-paths": {WorldSize: 4, NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 8, Hidden: 16, Scales: 2,
			DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 3, PrivateTokens: 2},
		"replicas": {WorldSize: 8, NVLinkSize: 4, ReplicaSize: 2, MaxTokens: 6, Hidden: 8,
			DispatchType: a2a.BF16, CombineType: a2a.FP32, Experts: 16, ExpertsPerToken: 4, PrivateTokens: 1, ExpertPadding: 16},
	} {
		t.Run(name, func(t *testing.T) {
			ctxs := world(t, cfg, "mem")
			a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs}, 3, 4)
		})
	}
}

// TestHostOverLibfabric carries the protocol over real providers on
// loopback: libfabric's tcp;ofi_rxm and shm, and ferry's ipc.
func TestHostOverLibfabric(t *testing.T) {
	cfg := a2a.Config{WorldSize: 4, NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 16, Hidden: 64, Scales: 4,
		DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 12, ExpertsPerToken: 4, PrivateTokens: 3}
	for _, transport := range []string{"tcp;ofi_rxm", "shm", "ipc"} {
		t.Run(transport, func(t *testing.T) {
			if _, err := fabric.ChooseTransport(transport, fabric.DomainOptions{Node: "127.0.0.1"}); err != nil {
				if errors.Is(err, fabric.ErrNotSupported) || errors.Is(err, fabric.ErrUnknownProvider) {
					t.Skipf("libfabric %s not available here: %v", transport, err)
				}
				t.Fatal(err)
			}
			ctxs := world(t, cfg, transport)
			a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs}, 9, 5)
		})
	}
}

func TestHostNewRejects(t *testing.T) {
	cfg := a2a.Config{WorldSize: 1, MaxTokens: 1, Hidden: 1, DispatchType: a2a.FP8, CombineType: a2a.BF16,
		Experts: 1, ExpertsPerToken: 1, NICsPerGPU: 2}
	ctx := context.Background()
	if _, err := host.New(ctx, cfg, host.Options{}); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("no engine: %v", err)
	}
	e, err := fabric.Open(ctx, fabric.Config{Transport: "mem", NICs: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	opt := host.Options{Engine: e, Exchange: a2atest.NewExchange(1).Member(0), Node: host.NewLocalNode(1).Member(0)}
	if _, err := host.New(ctx, cfg, opt); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("nic mismatch: %v", err)
	}
	cfg.NICsPerGPU = 1
	cfg.Experts = 0
	if _, err := host.New(ctx, cfg, opt); !errors.Is(err, a2a.ErrInvalidConfig) {
		t.Fatalf("bad config: %v", err)
	}
	cfg.Experts = 1
	b, err := host.New(ctx, cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := e.Regions(); n != 0 {
		t.Fatalf("%d regions left registered", n)
	}
}

// TestHostTimeoutAndNoLeaks: a rank whose peer never calls gets
// ErrTimeout instead of hanging, and closing everything leaves no
// goroutine behind.
func TestHostTimeoutAndNoLeaks(t *testing.T) {
	goroutines := testutil.SnapshotGoroutines()
	t.Run("timeout", func(t *testing.T) {
		cfg := a2a.Config{WorldSize: 2, MaxTokens: 4, Hidden: 8, DispatchType: a2a.BF16, CombineType: a2a.BF16,
			Experts: 4, ExpertsPerToken: 2}
		ctxs := world(t, cfg, "mem")
		l := ctxs[0].Layout()
		in := a2a.DispatchInput{Tokens: 1, X: make([]byte, l.TokenBytes), Indices: []uint32{0, 3}}
		out := a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), X: make([]byte, l.OutputRows*l.TokenBytes)}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if err := ctxs[0].Dispatch(ctx, &in, &out); !errors.Is(err, a2a.ErrTimeout) {
			t.Fatalf("dispatch without the peer: %v", err)
		}
	})
	goroutines.Check(t)
}

// TestHostBatched: the batched expert layout (MaxTokensPerExpert) equals
// the oracle on every path class, and a dispatch over the bound fails on
// every rank with ErrExpertOverflow.
func TestHostBatched(t *testing.T) {
	cfg := a2a.Config{WorldSize: 4, NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 8, Hidden: 16, Scales: 2,
		DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 3, PrivateTokens: 2,
		ExpertPadding: 4, MaxTokensPerExpert: 4 * 8}
	a2atest.Run(t, cfg, &a2atest.World{Contexts: world(t, cfg, "mem")}, 5, 3)
	cfg.MaxTokensPerExpert = 5
	a2atest.Overflow(t, cfg, world(t, cfg, "mem"))
}
