package kernelgate

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/ferryrdma/ferry/cuda"
)

// requireNVRTC skips the test (fails it when FERRY_TEST_REQUIRE names
// nvrtc) when no NVRTC can be loaded.
func requireNVRTC(t *testing.T) (major, minor int) {
	t.Helper()
	major, minor, err := cuda.NVRTCVersion()
	if err == nil {
		return major, minor
	}
	if !errors.Is(err, cuda.ErrNotSupported) {
		t.Fatalf("nvrtc: %v", err)
	}
	testutil.Skip(t, "nvrtc", "kernel compile gate SKIPPED: no NVRTC here (scripts/deps-nvrtc.sh installs it on Debian 12): %v", err)
	return 0, 0
}

// testBuilds are device code only tests compile: the cuda package's test
// kernels and the header's API sample.
func testBuilds(t *testing.T) []cuda.KernelBuild {
	read := func(rel string) cuda.Source {
		b, err := os.ReadFile(filepath.Join("..", "..", rel))
		if err != nil {
			t.Fatal(err)
		}
		return cuda.Source{Name: filepath.Base(rel), Code: string(b)}
	}
	return []cuda.KernelBuild{
		{Name: "cuda test kernels", Source: read("cuda/testdata/test_kernels.cu"), Launches: []cuda.KernelLaunch{
			{Kernel: "ferry_test_fill", MaxBlock: 256}, {Kernel: "ferry_test_grid_barrier", MaxBlock: 128},
			{Kernel: "ferry_test_inc", MaxBlock: 32}}},
		{Name: "device header API", Source: read("cuda/testdata/header_api.cu"), Launches: []cuda.KernelLaunch{
			{Kernel: "header_api", MaxBlock: 256}}},
	}
}

// compileAll compiles every build for every arch, two at a time, with
// the line table the SASS check reads.
func compileAll(builds []cuda.KernelBuild, archs []string) ([]Report, []error) {
	type job struct {
		b    cuda.KernelBuild
		arch string
	}
	var jobs []job
	for _, b := range builds {
		for _, a := range archs {
			jobs = append(jobs, job{b, a})
		}
	}
	reports := make([]Report, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				reports[i], errs[i] = Compile(jobs[i].b, jobs[i].arch, "-lineinfo")
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	return reports, errs
}

// TestKernelGate is the compile gate: every kernel of the repository, in
// every specialisation the code launches, compiles with each NVRTC
// generation found (the system's, NVRTC 11.8 on Debian 12, for sm_80 and
// sm_90; the one make deps unpacks into .deps, NVRTC 12.4, for sm_80,
// sm_90 and sm_90a) with no spill, within its launch bounds; and the SASS
// of every cubin passes the memory-model check (memcheck.go), with the
// nvdisasm of the same generation. Each generation runs in a child
// process of this test binary: the cuda package binds one NVRTC per
// process, and a compiler crash (NVRTC 11.8 overflows its stack on some
// tiny sm_90 kernels with -lineinfo) then fails one generation with its
// output instead of killing the test binary.
func TestKernelGate(t *testing.T) {
	if spec := os.Getenv(gateChildEnv); spec != "" {
		gateChild(t, spec)
		return
	}
	major, minor := requireNVRTC(t)
	gens := generations(t, major, minor)
	have12 := false
	for _, g := range gens {
		have12 = have12 || g.major >= 12
		t.Run(g.name, func(t *testing.T) { runGeneration(t, g) })
	}
	if !have12 {
		t.Run("NVRTC 12", func(t *testing.T) {
			testutil.Skip(t, "nvrtc12", "kernel gate: NVRTC 12 generation SKIPPED: no NVRTC 12 in %s (make deps: scripts/deps-cudatools.sh)", depsDir())
		})
	}
}

// TestGateRefuses proves the gate can fail: real compilations of a kernel
// that spills, one without launch bounds (with a __noinline__ helper, which
// is not a kernel), and launch lists that do not match the code.
func TestGateRefuses(t *testing.T) {
	requireNVRTC(t)
	spill := cuda.KernelBuild{Name: "spiller", Source: cuda.Source{Name: "spill.cu", Code: `
extern "C" __global__ void __launch_bounds__(1024, 2) gate_spills(const float *in, float *out) {
	float v[64];
#pragma unroll
	for (int i = 0; i < 64; i++) v[i] = in[threadIdx.x + i * 1024];
	__syncthreads();
#pragma unroll
	for (int j = 0; j < 8; j++)
#pragma unroll
		for (int i = 0; i < 64; i++) v[i] = v[i] * v[(i + j + 1) & 63] + 1.0f;
#pragma unroll
	for (int i = 0; i < 64; i++) out[threadIdx.x + i * 1024] = v[i];
}`}, Launches: []cuda.KernelLaunch{{Kernel: "gate_spills", MaxBlock: 1024}}}
	r, err := Compile(spill, "sm_80")
	if err != nil {
		t.Fatal(err)
	}
	if k := r.Kernels[0]; k.MaxThreads != 1024 || k.MaxRegisters != 32 || k.SpillStores == 0 {
		t.Fatalf("spiller figures: %+v", k)
	}
	wantProblems(t, r, "gate_spills (sm_80) spills")

	loose := cuda.KernelBuild{Name: "loose", Source: cuda.Source{Name: "loose.cu", Code: `
__device__ __noinline__ float helper(const float *p, int n) { float s = 0; for (int i = 0; i < n; i++) s += p[i]; return s; }
extern "C" __global__ void unbounded(const float *in, float *out) { out[threadIdx.x] = helper(in, threadIdx.x); }
extern "C" __global__ void __launch_bounds__(64) small(float *out) { out[threadIdx.x] = 1.0f; }
extern "C" __global__ void __launch_bounds__(64) stray(float *out) { out[threadIdx.x] = 2.0f; }`},
		Launches: []cuda.KernelLaunch{{Kernel: "unbounded", MaxBlock: 128}, {Kernel: "small", MaxBlock: 128}, {Kernel: "gone", MaxBlock: 32}}}
	r, err = Compile(loose, "sm_90")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kernels) != 3 {
		t.Fatalf("kernels %+v (the helper is not one)", r.Kernels)
	}
	wantProblems(t, r, "unbounded (sm_90) has no __launch_bounds__",
		"small (sm_90) is launched with 128 threads, its launch bounds allow 64",
		"stray (sm_90) is not listed", "gone (sm_90) is launched but not in the compiled code")

	// A compile error is an error, with NVRTC's log.
	if _, err := Compile(cuda.KernelBuild{Name: "broken", Source: cuda.Source{Name: "b.cu", Code: "extern \"C\" __global__ void b() { nope(); }"}}, "sm_80"); !errors.Is(err, cuda.ErrCompile) {
		t.Fatalf("broken source: %v", err)
	}
}

func wantProblems(t *testing.T, r Report, want ...string) {
	t.Helper()
	got := strings.Join(r.Problems(), "\n")
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("problems lack %q:\n%s", w, got)
		}
	}
}

// TestReportProblems covers what ptxas itself prevents (registers over the
// budget) with a made-up report, and a clean one.
func TestReportProblems(t *testing.T) {
	b := cuda.KernelBuild{Name: "made up", Launches: []cuda.KernelLaunch{{Kernel: "k", MaxBlock: 256}}}
	r := Report{Build: b, Arch: "sm_90", Kernels: []KernelStats{{Kernel: "k", Registers: 72, MaxRegisters: 64, MaxThreads: 512}}}
	wantProblems(t, r, "k (sm_90) uses 72 registers, its launch bounds allow 64")
	r.Kernels[0].Registers = 64
	if p := r.Problems(); len(p) != 0 {
		t.Fatalf("clean report refused: %v", p)
	}
	r.Spills = []FunctionSpill{{Function: "_Z6helperPKfi", Stores: 8}}
	wantProblems(t, r, "_Z6helperPKfi (sm_90) spills")
}

func TestParsePtxasLog(t *testing.T) {
	log := `ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'a' for 'sm_90'
ptxas info    : Function properties for a
ptxas         .     16 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 40 registers, 2048 bytes smem, 376 bytes cmem[0]
ptxas info    : Function properties for _Z1hv
ptxas         .     8 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Compiling entry function 'b' for 'sm_90'
ptxas info    : Function properties for b
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers
`
	entries, st, spills := parsePtxasLog(log)
	if !slices.Equal(entries, []string{"a", "b"}) {
		t.Fatalf("entries %v", entries)
	}
	if a := st["a"]; a.Registers != 40 || a.SharedBytes != 2048 || a.StackFrame != 16 || a.SpillStores != 4 || a.SpillLoads != 8 {
		t.Fatalf("a: %+v", a)
	}
	if b := st["b"]; b.Registers != 12 || b.SharedBytes != 0 {
		t.Fatalf("b: %+v", b)
	}
	if len(spills) != 2 || spills[1].Function != "_Z1hv" {
		t.Fatalf("spills %+v", spills)
	}
}
