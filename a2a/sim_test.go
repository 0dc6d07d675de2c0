package a2a_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	"github.com/ferryrdma/ferry/a2a/internal/memsim"
	"github.com/ferryrdma/ferry/a2a/workload"
)

// runWorld runs iters iterations over memsim and checks the immediate
// counters are exactly consumed at the end.
func runWorld(t *testing.T, cfg a2a.Config, seed uint64, iters int, opt memsim.Options) {
	t.Helper()
	world, err := memsim.NewWorld(cfg, opt)
	if err != nil {
		t.Fatal(err)
	}
	w := &a2atest.World{BeforeIteration: func(it int) { world.Poison(byte(0xa5 + it)) }, Timeout: 20 * time.Second}
	for r := 0; r < cfg.WorldSize; r++ {
		c := cfg
		c.Rank = r
		ctx, err := a2a.New(c, world.Backend(r))
		if err != nil {
			t.Fatal(err)
		}
		defer ctx.Close()
		w.Contexts = append(w.Contexts, ctx)
	}
	a2atest.Run(t, cfg, w, seed, iters)
	if err := world.Residue(); err != nil {
		t.Fatalf("immediate counts: %v", err)
	}
}

func TestSimulatedProtocolRandom(t *testing.T) {
	n := 150
	if testing.Short() {
		n = 25
	}
	rng := rand.New(rand.NewPCG(2026, 11))
	for i := 0; i < n; i++ {
		cfg := workload.RandomConfig(rng, 16)
		seed := rng.Uint64()
		name := fmt.Sprintf("%d/W%d_S%d_D%d_E%d_K%d_T%d_M%d_pad%d_nic%d", i, cfg.WorldSize, cfg.NVLinkSize, cfg.ReplicaSize,
			cfg.Experts, cfg.ExpertsPerToken, cfg.MaxTokens, cfg.PrivateTokens, cfg.ExpertPadding, cfg.NICsPerGPU)
		t.Run(name, func(t *testing.T) {
			opt := memsim.Options{Seed: seed}
			if i%4 == 0 {
				opt.MaxDelay = 200 * time.Microsecond
			}
			runWorld(t, cfg, seed, 3, opt)
		})
	}
}

// TestSimulatedProtocolShapes pins the corner cases the reference got wrong
// or its tests covered: replicas across domains (duplicate eager writes),
// zero tokens everywhere, no private window, G*L < K buffer sizing, padding
// overflow of the output bound.
func TestSimulatedProtocolShapes(t *testing.T) {
	base := a2a.Config{Hidden: 8, Scales: 2, DispatchType: a2a.FP8, CombineType: a2a.BF16, MaxTokens: 6}
	cases := map[string]func(c *a2a.Config){
		"replicas-across-domains": func(c *a2a.Config) {
			c.WorldSize, c.NVLinkSize, c.ReplicaSize, c.Experts, c.ExpertsPerToken = 8, 2, 2, 16, 4
		},
		"no-window-multi-nic": func(c *a2a.Config) {
			c.WorldSize, c.NVLinkSize, c.Experts, c.ExpertsPerToken, c.PrivateTokens, c.NICsPerGPU = 4, 2, 8, 2, a2a.NoPrivateWindow, 3
		},
		"one-group-small-L": func(c *a2a.Config) {
			c.WorldSize, c.NVLinkSize, c.ReplicaSize, c.Experts, c.ExpertsPerToken = 4, 4, 4, 8, 4
		},
		"padding-bound": func(c *a2a.Config) {
			c.WorldSize, c.Experts, c.ExpertsPerToken, c.ExpertPadding, c.MaxTokens = 2, 4, 2, 16, 17
		},
		"single-rank": func(c *a2a.Config) {
			c.WorldSize, c.Experts, c.ExpertsPerToken = 1, 3, 3
		},
		"ranks-without-experts": func(c *a2a.Config) {
			c.WorldSize, c.NVLinkSize, c.Experts, c.ExpertsPerToken = 8, 2, 5, 2
		},
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := base
			mod(&cfg)
			runWorld(t, cfg, 5, 4, memsim.Options{Seed: 5, MaxDelay: 100 * time.Microsecond})
		})
	}
}

// TestSimulatedProtocolMasked runs random worlds through membership
// changes over memsim: a random set of active ranks, then another (ranks
// leave and come back), then everyone, each for a few iterations checked
// against the masked oracle, with every immediate consumed exactly at the
// end (Residue).
func TestSimulatedProtocolMasked(t *testing.T) {
	n := 60
	if testing.Short() {
		n = 12
	}
	rng := rand.New(rand.NewPCG(2027, 5))
	for i := 0; i < n; i++ {
		cfg := workload.RandomConfig(rng, 12)
		seed := rng.Uint64()
		masks := [][]bool{workload.RandomActive(rng, cfg.WorldSize, -1), workload.RandomActive(rng, cfg.WorldSize, -1), nil}
		name := fmt.Sprintf("%d/W%d_S%d_D%d_E%d_K%d", i, cfg.WorldSize, cfg.NVLinkSize, cfg.ReplicaSize, cfg.Experts,
			cfg.ExpertsPerToken)
		t.Run(name, func(t *testing.T) {
			world, err := memsim.NewWorld(cfg, memsim.Options{Seed: seed, MaxDelay: 50 * time.Microsecond})
			if err != nil {
				t.Fatal(err)
			}
			w := &a2atest.World{BeforeIteration: func(it int) { world.Poison(byte(0x5a + it)) }, Timeout: 20 * time.Second}
			for r := 0; r < cfg.WorldSize; r++ {
				c := cfg
				c.Rank = r
				ctx, err := a2a.New(c, world.Backend(r))
				if err != nil {
					t.Fatal(err)
				}
				defer ctx.Close()
				w.Contexts = append(w.Contexts, ctx)
			}
			for gen, active := range masks {
				if active == nil {
					active = make([]bool, cfg.WorldSize)
					for q := range active {
						active[q] = true
					}
				}
				a2atest.SetActive(t, w.Contexts, uint32(gen+1), active, nil)
				w.Active = active
				a2atest.Run(t, cfg, w, seed+uint64(gen), 2)
			}
			if err := world.Residue(); err != nil {
				t.Fatalf("immediate counts: %v", err)
			}
		})
	}
}
