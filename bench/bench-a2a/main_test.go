package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ferryrdma/ferry/a2a/bench"
	"github.com/ferryrdma/ferry/fabric"
)

// asMain makes the test binary behave as bench-a2a, so --spawn can start
// it as the ranks of a job.
const asMain = "BENCH_A2A_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// noEnv is an empty launcher environment.
func noEnv(string) (string, bool) { return "", false }

func TestFlags(t *testing.T) {
	var sink strings.Builder
	o, err := parseFlags([]string{"--world-size", "4", "--spawn", "--nvlink=2", "--dp=2", "--tokens=7",
		"--in-dtype=bf16", "--out-dtype=fp32", "--json=x.json"}, noEnv, &sink)
	if err != nil {
		t.Fatal(err)
	}
	c := o.spec.Config
	if c.WorldSize != 4 || c.NVLinkSize != 2 || c.ReplicaSize != 2 || c.MaxTokens != 7 || c.Hidden != 7168 ||
		c.Experts != 256 || c.ExpertsPerToken != 8 || c.Scales != 56 || c.DispatchType.String() != "bf16" ||
		c.CombineType.String() != "fp32" {
		t.Fatalf("config %+v", c)
	}
	if o.spec.Transport != "shm" || o.spec.Node != "127.0.0.1" || o.spec.Backend != "host" {
		t.Fatalf("spawn defaults: %+v", o.spec)
	}
	args := o.childArgs()
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if jobFlags[name] {
			t.Fatalf("child args carry %s: %q", a, args)
		}
	}
	for _, want := range []string{"--world-size=4", "--provider=shm", "--node=127.0.0.1", "--nvlink=2", "--json=x.json", "--in-dtype=bf16"} {
		if !slices.Contains(args, want) {
			t.Fatalf("child args lack %s: %q", want, args)
		}
	}
	// A child parses them back to the same spec.
	back, err := parseFlags(args, noEnv, &sink)
	if err != nil || back.spec != o.spec || back.json != o.json {
		t.Fatalf("child parse: %v\n%+v\n%+v", err, back.spec, o.spec)
	}

	// Without --spawn the transport is chosen the loud way.
	o, err = parseFlags(nil, noEnv, &sink)
	if err != nil || o.spec.Transport != "auto" || o.spec.Config.WorldSize != 1 {
		t.Fatalf("defaults: %v %+v", err, o)
	}
	// The launcher's environment gives the world.
	env := map[string]string{"WORLD_SIZE": "8", "RANK": "3"}
	o, err = parseFlags([]string{"--provider=shm"}, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &sink)
	if err != nil || o.rdv.Rank != 3 || o.spec.Config.WorldSize != 8 {
		t.Fatalf("launcher env: %v %+v", err, o)
	}
}

func TestFlagsRejected(t *testing.T) {
	for name, args := range map[string][]string{
		"in dtype":      {"--in-dtype=int8"},
		"out dtype":     {"--out-dtype=fp8"},
		"spawn rank":    {"--world-size=2", "--spawn", "--rank=1"},
		"spawn master":  {"--world-size=2", "--spawn", "--master=127.0.0.1:5"},
		"mem across":    {"--world-size=2", "--spawn", "--provider=mem"},
		"shape":         {"--world-size=4", "--nvlink=3"},
		"iters":         {"--iters=0"},
		"stray arg":     {"extra"},
		"unknown flag":  {"--frobnicate"},
		"bad rank":      {"--world-size=2", "--rank=2", "--provider=shm"},
		"topk > expert": {"--experts=4", "--topk=5"},
	} {
		t.Run(name, func(t *testing.T) {
			var stderr strings.Builder
			_, err := parseFlags(args, noEnv, &stderr)
			if !errors.Is(err, errUsage) {
				t.Fatalf("%q: %v", args, err)
			}
		})
	}
}

func TestCUDABackendNotBuilt(t *testing.T) {
	var stdout, stderr strings.Builder
	code := run([]string{"--world-size=2", "--spawn", "--backend=cuda"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "CUDA backend of a2a is not built yet") || stdout.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	_, err := parseFlags([]string{"--backend=cuda"}, noEnv, &stderr)
	if !errors.Is(err, fabric.ErrNotSupported) || errors.Is(err, errUsage) {
		t.Fatalf("cuda: %v", err)
	}
}

// requireTransport skips when libfabric or its provider is missing here,
// unless FERRY_TEST_REQUIRE lists "libfabric": then that fails.
func requireTransport(t *testing.T, transport string) {
	t.Helper()
	_, err := fabric.ChooseTransport(transport, fabric.DomainOptions{Node: "127.0.0.1"})
	if err == nil {
		return
	}
	if !errors.Is(err, fabric.ErrNotSupported) && !errors.Is(err, fabric.ErrUnknownProvider) {
		t.Fatal(err)
	}
	if slices.Contains(strings.Split(os.Getenv("FERRY_TEST_REQUIRE"), ","), "libfabric") {
		t.Fatalf("FERRY_TEST_REQUIRE lists libfabric but %s is not available: %v", transport, err)
	}
	t.Skipf("libfabric %s not available here: %v", transport, err)
}

// TestSpawn runs the command end to end: W processes of this binary,
// checked against the oracle, then timed; rank 0 prints the table and
// writes the JSON report.
func TestSpawn(t *testing.T) {
	for name, tc := range map[string]struct {
		args     []string
		elemSize int
	}{
		"shm-W4": {[]string{"--world-size=4", "--provider=shm"}, 1},
		"tcp-W4-nvlink2-dp2-nic2": {[]string{"--world-size=4", "--provider=tcp;ofi_rxm", "--nvlink=2", "--dp=2",
			"--nets-per-gpu=2", "--private=2", "--in-dtype=bf16", "--out-dtype=fp32"}, 2},
	} {
		t.Run(name, func(t *testing.T) {
			args := tc.args
			provider := strings.TrimPrefix(args[1], "--provider=")
			requireTransport(t, provider)
			t.Setenv(asMain, "1")
			js := filepath.Join(t.TempDir(), "report.json")
			args = append(args, "--spawn", "--check", "--check-iters=2", "--tokens=12", "--hidden=96",
				"--scales=3", "--experts=12", "--topk=3", "--iters=6", "--warmup=2", "--timeout=20s", "--json="+js)
			var stdout, stderr strings.Builder
			if code := run(args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			out := stdout.String()
			for _, want := range []string{"over " + provider, "4 ranks", "checked against the oracle first",
				"24 samples", "dispatch  both", "combine   recv"} {
				if !strings.Contains(out, want) {
					t.Errorf("table lacks %q:\n%s", want, out)
				}
			}
			b, err := os.ReadFile(js)
			if err != nil {
				t.Fatal(err)
			}
			var rep bench.Report
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatal(err)
			}
			if !rep.Checked || rep.Samples != 24 || rep.WorldSize != 4 || rep.Provider != provider ||
				rep.Dispatch.Both.P50 <= 0 || rep.Combine.Both.P50 <= 0 || rep.Dispatch.NominalBytes != int64(12*3*(96*tc.elemSize+3*4)) {
				t.Fatalf("report %+v", rep)
			}
		})
	}
}
