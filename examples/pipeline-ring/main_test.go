package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ferryrdma/ferry/fabric/job/jobtest"
)

// The ring as a user runs it: three processes over shm and over tcp, both
// decode patterns, then the tensor-parallel variant and the link probe,
// and four goroutines over mem. Every token and the prefill's checksum are
// compared with a single-process run (a mismatch exits 3).
func TestPipelineRing(t *testing.T) {
	exe := jobtest.Build(t)
	small := []string{"-layers", "6", "-hidden", "256", "-prompt", "40", "-chunk", "16", "-tokens", "8",
		"-prefill-layer-time", "200us", "-slots", "2"}
	for _, tc := range []struct {
		name, provider, launch string
		ranks                  int
		extra                  []string
		tokens                 int // checked tokens
	}{
		// relay: rank 0 and the last rank see 8 tokens each; allgather: all 3.
		{"shm", "shm", "spawn", 3, nil, 8*2 + 8*3},
		{"tcp", "tcp", "spawn", 3, nil, 8*2 + 8*3},
		{"tcp-tp", "tcp", "spawn", 2, []string{"-tp"}, 8 * 2},
		{"mem", "mem", "inproc", 4, []string{"-mode", "relay"}, 8 * 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-provider", tc.provider, "-launch", tc.launch, "-ranks", strconv.Itoa(tc.ranks)}, small...)
			res := jobtest.Run(t, exe, append(args, tc.extra...)...)
			res.RequireOK(t, tc.ranks)
			out := res.Results(t)
			if out["tokens_checked"] != float64(tc.tokens) {
				t.Errorf("%v tokens checked, want %d", out["tokens_checked"], tc.tokens)
			}
			for _, d := range out["decode"].([]any) {
				d := d.(map[string]any)
				if d["tokens"] != float64(8) || d["per_token"].(map[string]any)["p50_us"].(float64) <= 0 {
					t.Errorf("decode %v: %v", d["mode"], d)
				}
			}
			if !strings.Contains(res.Stdout, "match a single-process run") {
				t.Errorf("stdout:\n%s", res.Stdout)
			}
		})
	}
	t.Run("probe", func(t *testing.T) {
		res := jobtest.Run(t, exe, "-provider", "shm", "-launch", "spawn", "-ranks", "3", "-probe",
			"-probe-bytes", "256K", "-probe-iters", "20")
		res.RequireOK(t, 3)
		lat := res.Results(t)["latency_us"].([]any)
		for i, row := range lat {
			for j, v := range row.([]any) {
				if (i == j) != (v.(float64) == 0) {
					t.Errorf("latency %d->%d = %v", i, j, v)
				}
			}
		}
	})
}

// The reference is deterministic, and a pipeline's stages compose to it:
// running the layers in two halves gives the same activations as in one go.
func TestModelComposes(t *testing.T) {
	m := model{Layers: 4, Hidden: 64, Shards: 3, Vocab: 1000, Seed: 9}
	x, y := make([]uint16, 2*64), make([]uint16, 2*64)
	scr := make([]uint16, 4*64)
	for r := range 2 {
		m.embed(5+r, r, x[r*64:(r+1)*64])
	}
	copy(y, x)
	m.layers(0, 4, x, scr)
	m.layers(0, 1, y, scr)
	m.layers(1, 4, y, scr)
	for i := range x {
		if x[i] != y[i] {
			t.Fatalf("element %d: %d in one go, %d in two stages", i, x[i], y[i])
		}
	}
	// Tensor parallelism: the sum of every shard's partial is the block.
	part, acc := make([]uint16, len(x)), make([]uint16, len(x))
	copy(y, x)
	for s := range m.Shards {
		m.partial(2, 1, s, x, part)
		for i, v := range part {
			acc[i] += v
		}
	}
	m.block(2, 1, y, scr)
	for i := range x {
		if x[i]+acc[i] != y[i] {
			t.Fatalf("element %d: partials sum to %d, block gives %d", i, x[i]+acc[i], y[i])
		}
	}
	s1, t1 := m.reference(10, 4, 3)
	s2, t2 := m.reference(10, 3, 3)
	if s1 != s2 || len(t1) != 4 || t1[3] != t2[3] {
		t.Errorf("the reference depends on the chunk size: %x %v, %x %v", s1, t1, s2, t2)
	}
	// One flipped bit of an activation changes the prefill's checksum.
	copy(y, x)
	y[7] ^= 1
	if checksum(0, x) == checksum(0, y) {
		t.Error("a flipped bit keeps the checksum")
	}
}
