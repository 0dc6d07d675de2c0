//go:build linux

package a2a_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/fabrictest"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/fabric/rendezvous/rendezvoustest"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// The test binary re-executes itself as the ranks of a job: in the role
// "rank", its job in jobEnv, TestMain runs one rank instead of the tests.
func TestMain(m *testing.M) {
	testutil.Main(m, testutil.Roles{"rank": func() error {
		j, err := decodeJob(os.Getenv(jobEnv))
		if err != nil {
			return err
		}
		return runRankNoLeaks(j)
	}})
}

// fullEnv asks for the whole matrix (make test-a2a-full).
const fullEnv = "FERRY_A2A_FULL"

// testCase is one job and the path classes it must carry.
type testCase struct {
	name      string
	transport string
	backend   string // "host" (empty) or "cuda-emu"
	seed      uint64 // 0: the runner's base plus the case's index
	cfg       a2a.Config
	iters     int
	paths     []a2a.Path
}

func allPaths(cfg a2a.Config) []a2a.Path {
	l, _ := cfg.Layout()
	p := []a2a.Path{a2a.PathSelf}
	if l.NVLinkSize > l.ReplicaSize {
		p = append(p, a2a.PathNodePush, a2a.PathNodePull)
	}
	if l.Nodes > 1 {
		p = append(p, a2a.PathEager, a2a.PathOverflow)
	}
	if l.ReplicaSize > 1 {
		p = append(p, a2a.PathReplica)
	}
	return p
}

// surePaths are the classes any window size carries once the skewed
// iteration overflows every window: pushes and eager writes need a
// private window, which some cases of the matrix do without.
func surePaths(cfg a2a.Config) []a2a.Path {
	l, _ := cfg.Layout()
	p := []a2a.Path{a2a.PathSelf}
	if l.NVLinkSize > l.ReplicaSize {
		p = append(p, a2a.PathNodePull)
	}
	if l.Nodes > 1 {
		p = append(p, a2a.PathOverflow)
	}
	if l.ReplicaSize > 1 {
		p = append(p, a2a.PathReplica)
	}
	return p
}

// fastCases run in every go test: together they carry every path class,
// fp8 bytes with fp32 scales, bf16, fp16 and fp32 combine, D = 1 and 2,
// the three providers, 2 NICs and padding.
func fastCases() []testCase {
	cases := []testCase{
		{name: "shm/W8_S4_D2_fp8_bf16", transport: "shm", iters: 4, cfg: a2a.Config{WorldSize: 8, NVLinkSize: 4,
			ReplicaSize: 2, MaxTokens: 10, Hidden: 24, Scales: 3, DispatchType: a2a.FP8, CombineType: a2a.BF16,
			Experts: 20, ExpertsPerToken: 3, PrivateTokens: 1}},
		{name: "tcp/W4_S2_D1_nic2_bf16_fp32", transport: "tcp;ofi_rxm", iters: 4, cfg: a2a.Config{WorldSize: 4,
			NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 9, Hidden: 20, DispatchType: a2a.BF16, CombineType: a2a.FP32,
			Experts: 10, ExpertsPerToken: 4, PrivateTokens: 2, ExpertPadding: 16}},
		{name: "ipc/W4_S2_D2_nic2_fp8_fp16", transport: "ipc", iters: 4, cfg: a2a.Config{WorldSize: 4,
			NVLinkSize: 2, ReplicaSize: 2, NICsPerGPU: 2, MaxTokens: 8, Hidden: 32, Scales: 2, DispatchType: a2a.FP8,
			CombineType: a2a.FP16, Experts: 8, ExpertsPerToken: 2, PrivateTokens: 1}},
	}
	for i := range cases {
		cases[i].paths = allPaths(cases[i].cfg)
	}
	return cases
}

// emuFastCases are the CUDA backend's jobs in every go test: W 2 and 4
// over shm and tcp, node size 1, 2 and 4, replicas 1 and 2, 1 and 2
// NICs, fp8 tokens with scales, bf16 and fp32 combine; every job's four
// iterations carry zero tokens, an empty group, all first slots to one
// expert (every window overflows) and accumulation, with buffers
// poisoned between phases.
func emuFastCases() []testCase {
	cases := []testCase{
		{name: "emu/shm/W2_S1_D1_fp8_bf16", transport: "shm", cfg: a2a.Config{WorldSize: 2, MaxTokens: 6, Hidden: 24,
			Scales: 3, DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 6, ExpertsPerToken: 2, PrivateTokens: 2}},
		{name: "emu/tcp/W2_S2_D1_nic2_bf16_fp32", transport: "tcp;ofi_rxm", cfg: a2a.Config{WorldSize: 2, NVLinkSize: 2,
			NICsPerGPU: 2, MaxTokens: 5, Hidden: 20, DispatchType: a2a.BF16, CombineType: a2a.FP32, Experts: 5,
			ExpertsPerToken: 3, PrivateTokens: 1, ExpertPadding: 16}},
		{name: "emu/tcp/W4_S2_D1_nic2_fp8_bf16", transport: "tcp;ofi_rxm", cfg: a2a.Config{WorldSize: 4, NVLinkSize: 2,
			NICsPerGPU: 2, MaxTokens: 6, Hidden: 40, Scales: 5, DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 10,
			ExpertsPerToken: 3, PrivateTokens: 2}},
		{name: "emu/shm/W4_S4_D2_fp8_fp32", transport: "shm", cfg: a2a.Config{WorldSize: 4, NVLinkSize: 4, ReplicaSize: 2,
			MaxTokens: 5, Hidden: 16, Scales: 2, DispatchType: a2a.FP8, CombineType: a2a.FP32, Experts: 8,
			ExpertsPerToken: 2, PrivateTokens: 1}},
		{name: "emu/shm/W4_S2_D2_bf16_bf16", transport: "shm", cfg: a2a.Config{WorldSize: 4, NVLinkSize: 2, ReplicaSize: 2,
			MaxTokens: 5, Hidden: 12, DispatchType: a2a.BF16, CombineType: a2a.BF16, Experts: 7, ExpertsPerToken: 2,
			PrivateTokens: 1}},
	}
	for i := range cases {
		cases[i].backend, cases[i].iters = "cuda-emu", 4
		cases[i].paths = allPaths(cases[i].cfg)
	}
	return cases
}

// fullCases is the matrix: W in {2, 4, 8} over the three providers, D in
// {1, 2}, one or two domains, the three combine types, fp8 with scales.
func fullCases() []testCase {
	var cases []testCase
	types := [][2]a2a.DType{{a2a.FP8, a2a.BF16}, {a2a.BF16, a2a.FP32}, {a2a.FP32, a2a.FP16}, {a2a.FP8, a2a.FP32}}
	n := 0
	for _, transport := range []string{"shm", "tcp;ofi_rxm", "ipc"} {
		for _, W := range []int{2, 4, 8} {
			for _, D := range []int{1, 2} {
				domains := []int{D} // replicas alone in their domain
				if W != D {
					domains = append(domains, W) // one domain holding everything
				}
				for _, S := range domains {
					ty := types[n%len(types)]
					n++
					cfg := a2a.Config{WorldSize: W, NVLinkSize: S, ReplicaSize: D, NICsPerGPU: 1 + n%2,
						MaxTokens: 7 + n%5, Hidden: 16 + n%9, DispatchType: ty[0], CombineType: ty[1],
						Experts: 3*W + n%3, ExpertsPerToken: 1 + n%4, PrivateTokens: []int{1, 2, a2a.NoPrivateWindow, 0}[n%4],
						ExpertPadding: []int{1, 1, 16}[n%3]}
					if ty[0] == a2a.FP8 {
						cfg.Scales = 1 + n%4
					}
					cases = append(cases, testCase{
						name:      fmt.Sprintf("%s/W%d_S%d_D%d_%s_%s", transport[:3], W, S, D, ty[0], ty[1]),
						transport: transport, cfg: cfg, iters: 6, paths: surePaths(cfg),
					})
				}
			}
		}
	}
	return cases
}

// requireGxx skips when the CUDA emulator cannot build kernels here (no
// C++ compiler), unless FERRY_TEST_REQUIRE lists "cudaemu".
func requireGxx(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("g++"); err != nil {
		testutil.Skip(t, "cudaemu", "no g++ here: the CUDA emulator builds kernels with a C++20 compiler")
	}
}

// TestHostBackendProcesses runs each case as a job of one process per
// rank and checks, in the parent, that every expected path class was
// carried.
func TestHostBackendProcesses(t *testing.T) {
	cases := fastCases()
	if os.Getenv(fullEnv) != "" {
		cases = append(cases, fullCases()...)
	} else {
		t.Logf("fast subset; %s=1 (make test-a2a-full) runs the whole matrix", fullEnv)
	}
	runCases(t, cases, 100)
}

// TestCUDAEmuBackendProcesses runs the CUDA backend on the CPU emulator
// the same way: W ranks as processes over shm and tcp, node ranks sharing
// memfd mappings that their kernels address directly.
func TestCUDAEmuBackendProcesses(t *testing.T) {
	requireGxx(t)
	cases := emuFastCases()
	if os.Getenv(fullEnv) != "" {
		// The host backend's matrix with its seeds: the same inputs, so
		// the same path classes are carried.
		full := fullCases()
		for i := range full {
			full[i].backend = "cuda-emu"
			full[i].name = "emu/" + full[i].name
			full[i].seed = 100 + uint64(len(fastCases())+i)
		}
		cases = append(cases, full...)
	} else {
		t.Logf("fast subset; %s=1 (make test-a2a-full) runs the whole matrix", fullEnv)
	}
	runCases(t, cases, 300)
}

func runCases(t *testing.T, cases []testCase, seed uint64) {
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fabrictest.RequireTransport(t, tc.transport, "127.0.0.1")
			if tc.seed == 0 {
				tc.seed = seed + uint64(i)
			}
			j := job{Config: tc.cfg, Transport: tc.transport, Backend: tc.backend, Seed: tc.seed, Iters: tc.iters,
				PathsFile: filepath.Join(t.TempDir(), "paths")}
			js, err := json.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			rendezvoustest.MustRun(t, tc.cfg.WorldSize, "rank", rendezvoustest.Options{Env: []string{jobEnv + "=" + string(js)},
				Timeout: 3 * time.Minute})
			b, err := os.ReadFile(j.PathsFile)
			if err != nil || len(b) != 4 {
				t.Fatalf("rank 0 wrote no path classes: %v", err)
			}
			seen := binary.LittleEndian.Uint32(b)
			var names []string
			for p := a2a.PathSelf; p <= a2a.PathReplica; p++ {
				if seen&(1<<p) != 0 {
					names = append(names, p.String())
				}
			}
			t.Logf("paths carried: %v", names)
			for _, p := range tc.paths {
				if seen&(1<<p) == 0 {
					t.Errorf("no copy took path %s (seen %#x)", p, seen)
				}
			}
		})
	}
}
