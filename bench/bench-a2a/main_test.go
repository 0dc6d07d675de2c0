package main

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ferryrdma/ferry/fabric/fabrictest"

	"github.com/ferryrdma/ferry/bench/internal/a2abench"
	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// asMain is the role in which the test binary behaves as bench-a2a, so
// --spawn can start it as the ranks of a job.
const asMain = "bench-a2a"

func TestMain(m *testing.M) {
	testutil.Main(m, testutil.Roles{asMain: func() error { return testutil.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }})
}

// noEnv is an empty launcher environment.
func noEnv(string) (string, bool) { return "", false }

func TestFlags(t *testing.T) {
	var sink strings.Builder
	o, err := parseFlags([]string{"--world-size", "4", "--spawn", "--nvlink=2", "--dp=2", "--tokens=7,3",
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
	if o.spec.Transport != "shm" || o.spec.Node != "127.0.0.1" || o.spec.Backend != "host" ||
		!o.spec.Check || o.spec.CheckIters != 1 || !slices.Equal(o.spec.Tokens, []int{7, 3}) {
		t.Fatalf("spawn defaults: %+v", o.spec)
	}
	args := o.childArgs()
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if jobFlags[name] {
			t.Fatalf("child args carry %s: %q", a, args)
		}
	}
	for _, want := range []string{"--world-size=4", "--transport=shm", "--node=127.0.0.1", "--nvlink=2", "--json=x.json", "--in-dtype=bf16"} {
		if !slices.Contains(args, want) {
			t.Fatalf("child args lack %s: %q", want, args)
		}
	}
	// A child parses them back to the same spec.
	back, err := parseFlags(args, noEnv, &sink)
	if err != nil || !reflect.DeepEqual(back.spec, o.spec) || back.json != o.json {
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
		"in dtype":         {"--in-dtype=int8"},
		"out dtype":        {"--out-dtype=fp8"},
		"spawn rank":       {"--world-size=2", "--spawn", "--rank=1"},
		"spawn master":     {"--world-size=2", "--spawn", "--master=127.0.0.1:5"},
		"mem across":       {"--world-size=2", "--spawn", "--provider=mem"},
		"shape":            {"--world-size=4", "--nvlink=3"},
		"iters":            {"--iters=0"},
		"stray arg":        {"extra"},
		"unknown flag":     {"--frobnicate"},
		"bad rank":         {"--world-size=2", "--rank=2", "--provider=shm"},
		"topk > expert":    {"--experts=4", "--topk=5"},
		"tokens":           {"--tokens=8,x"},
		"no tokens":        {"--tokens=0"},
		"mode spawn":       {"--world-size=2", "--spawn", "--mode=lockstep", "--backend=cuda-emu"},
		"mode host":        {"--world-size=2", "--mode=lockstep"},
		"mode unknown":     {"--mode=sideways", "--backend=cuda-emu"},
		"graph concurrent": {"--mode=concurrent", "--graph", "--backend=cuda"},
		"poll unknown":     {"--poll=busy", "--backend=cuda-emu"},
		"spin host":        {"--spin"},
		"adaptive on gpu":  {"--poll=adaptive", "--backend=cuda"},
		"mpi order":        {"--mpi-order=interleaved"},
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

// TestCUDABackendNeedsDriver: --backend cuda is a valid request that a
// machine without a CUDA driver cannot serve; the ranks say so.
func TestCUDABackendNeedsDriver(t *testing.T) {
	if _, err := cuda.DeviceCount(); err == nil {
		t.Skip("a CUDA driver is present: the GPU scripts run this backend")
	}
	fabrictest.RequireTransport(t, "shm", "127.0.0.1")
	t.Setenv(testutil.RoleEnv, asMain)
	var stdout, stderr strings.Builder
	code := run([]string{"--world-size=2", "--spawn", "--backend=cuda", "--tokens=2", "--hidden=16", "--scales=0",
		"--experts=4", "--topk=2", "--iters=1", "--warmup=0"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "cuda: load driver") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	if _, err := parseFlags([]string{"--backend=cuda"}, noEnv, &stderr); err != nil {
		t.Fatalf("cuda: %v", err)
	}
	if _, err := parseFlags([]string{"--backend=gpu"}, noEnv, &stderr); !errors.Is(err, fabric.ErrNotSupported) {
		t.Fatalf("unknown backend: %v", err)
	}
}

// requireGxx skips when the CUDA emulator cannot build kernels here.
func requireGxx(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("g++"); err != nil {
		testutil.Skip(t, "cudaemu", "no g++ here: the CUDA emulator builds kernels with a C++20 compiler")
	}
}

// TestSpawn runs the command end to end: W processes of this binary, two
// cases each timed and then checked against the oracle; rank 0 streams the
// table and writes the JSON records.
func TestSpawn(t *testing.T) {
	for name, tc := range map[string]struct {
		args     []string
		elemSize int
	}{
		"shm-W4":           {[]string{"--world-size=4", "--provider=shm"}, 1},
		"ipc-W4-mpi-phase": {[]string{"--world-size=4", "--provider=ipc", "--mpi-order=phase"}, 1},
		"tcp-W4-nvlink2-dp2-nic2": {[]string{"--world-size=4", "--provider=tcp;ofi_rxm", "--nvlink=2", "--dp=2",
			"--nets-per-gpu=2", "--private=2", "--in-dtype=bf16", "--out-dtype=fp32", "--peers=false"}, 2},
		"cuda-emu-shm-W4-nvlink2": {[]string{"--world-size=4", "--provider=shm", "--backend=cuda-emu", "--nvlink=2",
			"--private=1"}, 1},
	} {
		t.Run(name, func(t *testing.T) {
			args := tc.args
			provider := strings.TrimPrefix(args[1], "--provider=")
			fabrictest.RequireTransport(t, provider, "127.0.0.1")
			if slices.Contains(args, "--backend=cuda-emu") {
				requireGxx(t)
			}
			t.Setenv(testutil.RoleEnv, asMain)
			js := filepath.Join(t.TempDir(), "report.jsonl")
			args = append(args, "--spawn", "--check-iters=2", "--tokens=5,12", "--hidden=96",
				"--scales=3", "--experts=12", "--topk=3", "--iters=6", "--warmup=2", "--timeout=20s", "--json="+js)
			var stdout, stderr strings.Builder
			if code := run(args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			out := stdout.String()
			for _, want := range []string{"# bench-a2a\n", "over " + provider + " (explicit)", "4 ranks",
				"up to 12 tokens per rank", "every rank ran 2 iterations", "# tokens phase", "# done: 4 cases, 4 verified, 0 failed"} {
				if !strings.Contains(out, want) {
					t.Errorf("table lacks %q:\n%s", want, out)
				}
			}
			rows := 0
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				if strings.HasPrefix(line, "#") || len(f) == 0 {
					continue
				}
				if len(f) != 14 || f[13] != "yes" || (f[1] != "dispatch" && f[1] != "combine") {
					t.Errorf("row %q", line)
				}
				rows++
			}
			if rows != 4 {
				t.Fatalf("%d rows, want 4:\n%s", rows, out)
			}
			b, err := os.ReadFile(js)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			if len(lines) != 6 {
				t.Fatalf("%d JSON records, want begin, 4 cases, end:\n%s", len(lines), b)
			}
			var begin struct {
				Type  string          `json:"type"`
				Setup a2abench.Report `json:"setup"`
			}
			if err := json.Unmarshal([]byte(lines[0]), &begin); err != nil || begin.Type != "begin" ||
				begin.Setup.WorldSize != 4 || begin.Setup.Provider != provider || begin.Setup.CheckIters != 2 {
				t.Fatalf("begin %s: %v", lines[0], err)
			}
			for i, tokens := range []int{5, 5, 12, 12} {
				var rec caseRecord
				var kind struct {
					Type string `json:"type"`
				}
				if err := json.Unmarshal([]byte(lines[1+i]), &rec); err != nil {
					t.Fatal(err)
				}
				_ = json.Unmarshal([]byte(lines[1+i]), &kind)
				phase := []string{a2abench.Dispatch, a2abench.Combine}[i%2]
				if kind.Type != "case" || rec.Tokens != tokens || rec.Phase != phase || !rec.Verified ||
					rec.Lat.N != 24 || rec.Lat.P50 <= 0 || rec.Send.P50 <= 0 || rec.GBps <= 0 {
					t.Fatalf("case record %s", lines[1+i])
				}
				if phase == a2abench.Dispatch && rec.NominalBytes != int64(tokens*3*(96*tc.elemSize+3*4)) {
					t.Fatalf("nominal bytes %d", rec.NominalBytes)
				}
				checkPeers(t, rec, !slices.Contains(args, "--peers=false"), !slices.Contains(args, "--backend=cuda-emu"))
				// Writes carry rows at their own size: 96 elements, and in
				// dispatch 3 scales padded from 12 to 16 bytes.
				want := 1.0
				if phase == a2abench.Dispatch {
					want = float64(96*tc.elemSize+16) / float64(96*tc.elemSize+12)
				}
				if len(rec.Wire) != 4 {
					t.Fatalf("wire of %d ranks, want 4: %s", len(rec.Wire), lines[1+i])
				}
				for _, w := range rec.Wire {
					if w.Rows > 0 && math.Abs(w.Ratio-want) > 1e-9 {
						t.Errorf("rank %d %s wire ratio %v, want %v: %s", w.Rank, phase, w.Ratio, want, lines[1+i])
					}
				}
			}
		})
	}
}

// checkPeers checks a case record's floor and, with the host backend,
// Open MPI columns: present and positive, or (MPI) an error that says why
// not, never silently absent.
func checkPeers(t *testing.T, rec caseRecord, peers, host bool) {
	t.Helper()
	if !peers {
		if rec.Floor != nil || rec.MPI != nil || rec.MPIError != "" {
			t.Fatalf("--peers=false, yet floor %v, mpi %v %q", rec.Floor, rec.MPI, rec.MPIError)
		}
		return
	}
	if rec.Floor == nil || rec.Floor.P50 <= 0 || rec.XFloor <= 0 {
		t.Fatalf("no memcpy floor: %+v", rec)
	}
	switch {
	case !host:
		if rec.MPI != nil || rec.MPIError != "" {
			t.Fatalf("MPI beside a non-host backend: %v %q", rec.MPI, rec.MPIError)
		}
	case rec.MPIError != "":
		if _, err := exec.LookPath("mpirun"); err == nil {
			t.Fatalf("mpirun is installed, yet MPI did not run: %s", rec.MPIError)
		}
		t.Logf("MPI not run, as the record says: %s", rec.MPIError)
	case rec.MPI == nil || rec.MPI.P50 <= 0 || rec.XMPI <= 0:
		t.Fatalf("no MPI figures and no reason: %+v", rec)
	}
}

// TestDeviceModes runs every rank in this process on the emulator, in
// lock step and concurrently, each case timed and checked against the
// oracle; the floor columns say they are GPU only, and --graph there is
// refused, saying it needs a GPU.
func TestDeviceModes(t *testing.T) {
	requireGxx(t)
	for _, mode := range []string{"lockstep", "concurrent"} {
		t.Run(mode, func(t *testing.T) {
			js := filepath.Join(t.TempDir(), "report.jsonl")
			args := []string{"--world-size=4", "--nvlink=2", "--backend=cuda-emu", "--mode=" + mode, "--tokens=3,6",
				"--hidden=32", "--scales=2", "--experts=8", "--topk=2", "--private=1", "--iters=3", "--warmup=1",
				"--check-iters=1", "--timeout=20s", "--json=" + js}
			var stdout, stderr strings.Builder
			if code := run(args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			out := stdout.String()
			for _, want := range []string{"every rank on one device", "4 ranks of the cuda-emu backend on cpu emulator, " + mode,
				"GPU only (--backend cuda)", "# tokens mode", "# done: 2 cases, 2 verified, 0 failed"} {
				if !strings.Contains(out, want) {
					t.Errorf("table lacks %q:\n%s", want, out)
				}
			}
			rows := 0
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				if strings.HasPrefix(line, "#") || len(f) == 0 {
					continue
				}
				phased := mode == "lockstep"
				if len(f) != 12 || f[1] != mode || f[11] != "yes" || f[9] != "-" || f[10] != "-" || (f[5] != "-") != phased {
					t.Errorf("row %q", line)
				}
				rows++
			}
			if rows != 2 {
				t.Fatalf("%d rows, want 2:\n%s", rows, out)
			}
			b, err := os.ReadFile(js)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			if len(lines) != 4 {
				t.Fatalf("%d JSON records, want begin, 2 cases, end:\n%s", len(lines), b)
			}
			for i, tokens := range []int{3, 6} {
				var rec deviceRecord
				if err := json.Unmarshal([]byte(lines[1+i]), &rec); err != nil {
					t.Fatal(err)
				}
				if rec.Tokens != tokens || rec.Mode != mode || !rec.Verified || rec.Lat.N != 3 || rec.Lat.P50 <= 0 ||
					rec.Bytes <= 0 || rec.XHBM != 0 || (len(rec.Phases) == 4) != (mode == "lockstep") || rec.RankUs != rec.Lat.P50/4 {
					t.Fatalf("case record %s", lines[1+i])
				}
			}
		})
	}
	var stderr strings.Builder
	_, err := parseFlags([]string{"--world-size=2", "--graph", "--backend=cuda-emu"}, noEnv, &stderr)
	if !errors.Is(err, fabric.ErrNotSupported) || !strings.Contains(err.Error(), "--graph needs a GPU") {
		t.Fatalf("--graph on the emulator: %v", err)
	}
}

// TestModel: --model prints the labelled model of the EP8 decode step,
// every term and the totals, and runs nothing.
func TestModel(t *testing.T) {
	var out, errOut strings.Builder
	if rc := run([]string{"--model", "--world-size", "8", "--nvlink", "8"}, &out, &errOut); rc != 0 {
		t.Fatalf("exit %d: %s", rc, errOut.String())
	}
	s := out.String()
	for _, want := range []string{"MODEL, not a measurement", "6.62 MB NVLink", "model dispatch", "TOTAL (pplx-garden EP8 decode, published: 50 us)",
		"TOTAL (pplx-garden EP8 decode, published: 64 us)"} {
		if !strings.Contains(s, want) {
			t.Errorf("model output lacks %q:\n%s", want, s)
		}
	}
}
