package bench_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/bench"
	"github.com/ferryrdma/ferry/fabric"
)

func TestSpecValidate(t *testing.T) {
	cfg := a2a.Config{WorldSize: 4, MaxTokens: 8, Hidden: 16, DispatchType: a2a.FP8, CombineType: a2a.BF16,
		Experts: 8, ExpertsPerToken: 2}
	ok := bench.Spec{Config: cfg, Iters: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cuda := ok
	cuda.Backend = "cuda"
	err := cuda.Validate()
	if !errors.Is(err, fabric.ErrNotSupported) || !strings.Contains(err.Error(), "not built yet") {
		t.Fatalf("cuda backend: %v", err)
	}
	other := ok
	other.Backend = "gpu"
	if err := other.Validate(); !errors.Is(err, fabric.ErrNotSupported) {
		t.Fatalf("unknown backend: %v", err)
	}
	neg := ok
	neg.CheckIters = -1
	if err := neg.Validate(); !errors.Is(err, a2a.ErrInvalidArgument) {
		t.Fatalf("negative check iterations: %v", err)
	}
	bad := ok
	bad.Config.NVLinkSize = 3
	var ce *a2a.ConfigError
	if err := bad.Validate(); !errors.As(err, &ce) || ce.Field != "NVLinkSize" {
		t.Fatalf("bad shape: %v", err)
	}
}

func TestWriteTable(t *testing.T) {
	spec := bench.Spec{
		Config: a2a.Config{WorldSize: 2, MaxTokens: 8, Hidden: 32, Scales: 2, DispatchType: a2a.FP8,
			CombineType: a2a.BF16, Experts: 4, ExpertsPerToken: 2},
		Transport: "mem", Iters: 3, Warmup: 1, Seed: 2,
	}
	r := runLocal(t, spec)[1]
	var sb strings.Builder
	if err := r.WriteTable(&sb); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	for _, want := range []string{"host backend over mem", "2 ranks", "fp8 dispatch, bf16 combine",
		"3 iterations after 1 warmup, 6 samples", "not checked", "p50 µs", "p99 µs", "± sd", "GB/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 8 && (f[0] == "dispatch" || f[0] == "combine") && (f[1] == "both" || f[1] == "send" || f[1] == "recv") {
			rows++
		}
	}
	if rows != 6 {
		t.Fatalf("%d phase rows, want 6:\n%s", rows, out)
	}
}
