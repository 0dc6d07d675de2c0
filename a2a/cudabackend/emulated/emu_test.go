package emulated_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	"github.com/ferryrdma/ferry/a2a/workload"
)

// TestEmuShapes runs the shapes that carry every path class: two domains
// of two ranks (node push and pull, RDMA eager and overflow, 2 NICs, fp8
// tokens with scales, bf16 combine), replicas across domains with padding
// and fp32 combine, one domain holding everything (fp16 combine), and a
// world of single-rank domains. Every iteration poisons every buffer
// first; results must equal the oracle bit for bit.
func TestEmuShapes(t *testing.T) {
	for name, cfg := range map[string]a2a.Config{
		"all-paths": {WorldSize: 4, NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 8, Hidden: 40, Scales: 3,
			DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 3, PrivateTokens: 2},
		"replicas": {WorldSize: 4, NVLinkSize: 2, ReplicaSize: 2, MaxTokens: 6, Hidden: 20,
			DispatchType: a2a.BF16, CombineType: a2a.FP32, Experts: 9, ExpertsPerToken: 4, PrivateTokens: 1, ExpertPadding: 16},
		"one-domain": {WorldSize: 4, NVLinkSize: 4, MaxTokens: 5, Hidden: 13, DispatchType: a2a.FP32,
			CombineType: a2a.FP16, Experts: 6, ExpertsPerToken: 2, PrivateTokens: a2a.NoPrivateWindow},
		"rdma-only": {WorldSize: 2, MaxTokens: 7, Hidden: 33, Scales: 5, DispatchType: a2a.FP8,
			CombineType: a2a.BF16, Experts: 5, ExpertsPerToken: 2, PrivateTokens: 1},
	} {
		t.Run(name, func(t *testing.T) {
			// The spinning worker on one shape, the default on the others.
			w := newWorld(t, cfg, "mem", cudabackend.Options{Spin: name == "all-paths"})
			a2atest.Run(t, cfg, &a2atest.World{Contexts: w.ctxs, BeforeIteration: w.poison, Timeout: time.Minute}, 3, 4)
		})
	}
}

// TestEmuRandom draws worlds over the whole configuration space.
func TestEmuRandom(t *testing.T) {
	n, maxW := 6, 4
	if testing.Short() {
		n = 2
	}
	if s := os.Getenv("FERRY_A2A_EMU_RANDOM"); s != "" {
		// A longer sweep, by hand: FERRY_A2A_EMU_RANDOM=<worlds>.
		n, _ = strconv.Atoi(s)
		maxW = 8
	}
	rng := rand.New(rand.NewPCG(41, 3))
	for i := 0; i < n; i++ {
		cfg := workload.RandomConfig(rng, maxW)
		seed := rng.Uint64()
		name := fmt.Sprintf("%d/W%d_S%d_D%d_E%d_K%d_T%d_M%d_pad%d_nic%d", i, cfg.WorldSize, cfg.NVLinkSize,
			cfg.ReplicaSize, cfg.Experts, cfg.ExpertsPerToken, cfg.MaxTokens, cfg.PrivateTokens, cfg.ExpertPadding, cfg.NICsPerGPU)
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, cfg, "mem", cudabackend.Options{})
			a2atest.Run(t, cfg, &a2atest.World{Contexts: w.ctxs, BeforeIteration: w.poison, Timeout: time.Minute}, seed, 3)
		})
	}
}

// TestEmuTimeoutNamesTheWait: a rank whose peer never calls gets a
// KernelError wrapping ErrTimeout that says the kernel was waiting for
// the receive plan (the peer's count row never came).
func TestEmuTimeoutNamesTheWait(t *testing.T) {
	cfg := a2a.Config{WorldSize: 2, MaxTokens: 4, Hidden: 8, DispatchType: a2a.BF16, CombineType: a2a.BF16,
		Experts: 4, ExpertsPerToken: 2}
	w := newWorld(t, cfg, "mem", cudabackend.Options{})
	l := w.ctxs[0].Layout()
	in := a2a.DispatchInput{Tokens: 1, X: make([]byte, l.TokenBytes), Indices: []uint32{0, 3}}
	out := a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), X: make([]byte, l.OutputRows*l.TokenBytes)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := w.ctxs[0].Dispatch(ctx, &in, &out)
	var ke *cudabackend.KernelError
	if !errors.Is(err, a2a.ErrTimeout) || !errors.As(err, &ke) || ke.Awaited != cudabackend.AwaitPlan {
		t.Fatalf("dispatch without the peer: %v, want a KernelError awaiting the plan", err)
	}
	t.Log(err)
	if err := w.ctxs[0].DispatchSend(ctx, &in); !errors.Is(err, a2a.ErrBroken) {
		t.Fatalf("after a timeout: %v, want ErrBroken", err)
	}
}

// TestEmuBatched: the CUDA kernels on the batched expert layout
// (MaxTokensPerExpert) equal the oracle, and a dispatch over the bound
// fails on every rank with ErrExpertOverflow.
func TestEmuBatched(t *testing.T) {
	cfg := a2a.Config{WorldSize: 4, NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 6, Hidden: 24, Scales: 3,
		DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 3, PrivateTokens: 2,
		MaxTokensPerExpert: 4 * 6}
	w := newWorld(t, cfg, "mem", cudabackend.Options{})
	a2atest.Run(t, cfg, &a2atest.World{Contexts: w.ctxs, BeforeIteration: w.poison, Timeout: time.Minute}, 7, 3)
	cfg.MaxTokensPerExpert = 7
	a2atest.Overflow(t, cfg, newWorld(t, cfg, "mem", cudabackend.Options{}).ctxs)
}
