package cudabackend

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/workload"
	"github.com/ferryrdma/ferry/cuda/emu"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// tsanConfig is a node-only world (the ThreadSanitizer program has no
// fabric): four ranks in one NVLink domain, a window of one copy so rows
// are both pushed and pulled, fp8 tokens with scales, bf16 combine.
var tsanConfig = a2a.Config{WorldSize: 4, NVLinkSize: 4, MaxTokens: 6, Hidden: 40, Scales: 3, DispatchType: a2a.FP8,
	CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 3, PrivateTokens: 1}

const (
	tsanIters = 3
	tsanGrid  = 2
	tsanBlock = 32
)

type scenarioWriter struct{ b bytes.Buffer }

func (w *scenarioWriter) u64(v ...int) {
	for _, x := range v {
		w.b.Write(binary.LittleEndian.AppendUint64(nil, uint64(x)))
	}
}

func (w *scenarioWriter) blob(b []byte) {
	w.u64(len(b))
	w.b.Write(b)
}

func asBytes[T any](v []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(z)))
}

// tsanScenario is the input of testdata/tsan_a2a.cpp: the sizes of every
// allocation, each rank's parameter block (addresses left 0 for the
// program), and per iteration and rank the inputs, the count table and
// receive plan the worker would produce (the program plays the worker
// but has no Go planner), and the oracle's outputs.
func tsanScenario(t *testing.T) []byte {
	cfg := tsanConfig
	l, err := cfg.Layout()
	if err != nil {
		t.Fatal(err)
	}
	ml := newMetaLayout(&l)
	W, S, G, T, K, L, O, E := l.WorldSize, l.NVLinkSize, l.Groups, l.MaxTokens, l.ExpertsPerToken, l.LocalExperts, l.OutputRows, l.Experts
	chunks := (T + 31) / 32
	var w scenarioWriter
	w.b.WriteString("A2AT")
	w.u64(W, S, G, tsanIters, tsanGrid, tsanBlock, T, K, L, O, l.TokenBytes, l.Scales, l.CombineBytes, l.RowWords, E)
	w.u64(int(l.SendBytes), int(l.RecvBytes)+syncBytes, int(l.RecvBytes), l.CountTableBytes, ctrlBytes, 4*ml.words,
		paramsSize, stateSize, 3*8*S, 4*E*chunks, 4*E*chunks, 4*(E+1), 4*T*K, recordBytes(&l))
	planners := make([]*a2a.Planner, W)
	for r := range W {
		c := cfg
		c.Rank = r
		lr, _ := c.Layout()
		w.blob(encodeParams(&lr, addrs{}, ml, chunks, tsanBlock))
		if planners[r], err = a2a.NewPlanner(c); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(12, 34))
	for range tsanIters {
		it, err := workload.NewIteration(rng, cfg, &l)
		if err != nil {
			t.Fatal(err)
		}
		table := make([]uint32, G*l.RowWords)
		for r, p := range planners {
			g := &it.Groups[l.Group(r)]
			if err := p.PlanSend(g.Indices, g.Tokens); err != nil {
				t.Fatal(err)
			}
			copy(table[l.Group(r)*l.RowWords:], p.Send().Row)
		}
		for r, p := range planners {
			if err := p.PlanRecv(table); err != nil {
				t.Fatal(err)
			}
			meta := make([]uint32, ml.words)
			if err := encodePlan(meta, p.Layout(), &ml, p.Recv()); err != nil {
				t.Fatal(err)
			}
			g := &it.Groups[l.Group(r)]
			acc := 0
			if it.Accumulate {
				acc = 1
			}
			w.u64(g.Tokens, acc)
			w.blob(g.X)
			w.blob(asBytes(g.Scales))
			w.blob(asBytes(g.Indices))
			w.blob(asBytes(g.Weights))
			w.blob(it.Ys[r])
			w.blob(it.Prev[l.Group(r)])
			w.blob(asBytes(table))
			w.blob(asBytes(meta))
			want := &it.Want[r]
			w.blob(asBytes(want.ExpertTokens[:L]))
			w.blob(asBytes(want.ExpertOffset[:L+1]))
			w.blob(want.X)
			w.blob(asBytes(want.Scales))
			real := make([]byte, O)
			for row, o := range want.Origin {
				if o.Group >= 0 {
					real[row] = 1
				}
			}
			w.blob(real)
			w.blob(it.WantOut[l.Group(r)])
		}
	}
	return w.b.Bytes()
}

// tsanRun builds testdata/tsan_a2a.cpp with -fsanitize=thread over the
// kernel sources (after mutate, when given) and runs it on the scenario.
// It returns the number of ThreadSanitizer reports, whether the program
// reported no failure, and its output.
func tsanRun(t *testing.T, mutate func(string) string) (races int, clean bool, out string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short")
	}
	cxx, err := emu.Compiler()
	testutil.SkipIfNotSupported(t, "cudaemu", err)
	dir := t.TempDir()
	if err := emu.WriteHeaders(dir); err != nil {
		t.Fatal(err)
	}
	srcs, err := Sources()
	if err != nil {
		t.Fatal(err)
	}
	var kernels strings.Builder
	for _, s := range srcs {
		kernels.WriteString(s.Code)
		kernels.WriteString("\n")
	}
	code := kernels.String()
	if mutate != nil {
		if code = mutate(code); code == kernels.String() {
			t.Fatal("the mutation changed nothing")
		}
	}
	prog, err := os.ReadFile("testdata/tsan_a2a.cpp")
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string][]byte{"a2a_kernels.cu": []byte(code), "tsan_a2a.cpp": prog,
		"scenario.bin": tsanScenario(t)} {
		if err := os.WriteFile(filepath.Join(dir, name), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "tsan_a2a")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	args := []string{"-std=c++20", "-O1", "-g", "-fsanitize=thread", "-pthread", "-ffp-contract=off", "-fno-strict-aliasing",
		"-Wno-tsan", fmt.Sprintf("-DA2A_THREADS=%d", tsanBlock), "-I", dir, "-o", bin, filepath.Join(dir, "tsan_a2a.cpp")}
	if b, err := exec.CommandContext(ctx, cxx, args...).CombinedOutput(); err != nil {
		t.Fatalf("g++ -fsanitize=thread: %v\n%s", err, b)
	}
	cmd := exec.CommandContext(ctx, bin, filepath.Join(dir, "scenario.bin"))
	cmd.Env = append(os.Environ(), "TSAN_OPTIONS=halt_on_error=0 exitcode=66")
	b, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("timed out:\n%s", b)
	}
	out = string(b)
	races = strings.Count(out, "WARNING: ThreadSanitizer:")
	clean = strings.Contains(out, "a2a tsan: 0 failures") && (err == nil || races > 0)
	return races, clean, out
}

func clip(s string) string {
	if len(s) > 8000 {
		return s[:8000] + "\n..."
	}
	return s
}

// TestThreadSanitizer runs the four kernels of four node ranks for three
// iterations in a C++ program built with -fsanitize=thread against the
// emulator's runtime (Go's race runtime and a TSan-built library cannot
// share a process). Every CUDA thread is a TSan fiber and the program's
// host threads play the CPU workers, so a missing acquire/release or
// barrier between two blocks, two ranks, or a kernel and its worker is a
// reported race. The results are checked against the oracle too.
func TestThreadSanitizer(t *testing.T) {
	races, clean, out := tsanRun(t, nil)
	if races > 0 || !clean {
		t.Fatalf("%d ThreadSanitizer reports, clean %v:\n%s", races, clean, clip(out))
	}
	t.Log(strings.TrimSpace(out))
}

// TestThreadSanitizerCatchesWeakRelease: the same program with the release
// that publishes a rank's dispatch rows to its node ranks weakened to a
// relaxed store must be reported (a check that cannot fail proves
// nothing).
func TestThreadSanitizerCatchesWeakRelease(t *testing.T) {
	races, _, out := tsanRun(t, func(code string) string {
		return strings.Replace(code, "threadIdx.x) + p->me;\n\t\tfd_fence_sys();\n\t\tfd_st_release_sys(slot, iter);",
			"threadIdx.x) + p->me;\n\t\tfd_st_relaxed_sys(slot, iter);", 1)
	})
	if races == 0 {
		t.Fatalf("no ThreadSanitizer report for a relaxed publication of node rows:\n%s", clip(out))
	}
	t.Logf("%d reports, as expected", races)
}
