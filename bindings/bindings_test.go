package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/ferryrdma/ferry/fabric/directory/etcd/etcdtest"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// These tests treat the library as its users do: build libferry.so with
// go build -buildmode=c-shared, compile the C example against ferry.h,
// run it over each transport, and check what the library exports.

// lib is built once per test binary.
var lib struct {
	once sync.Once
	dir  string
	err  error
	mu   sync.Mutex // guards compiling the example into dir
}

// buildLibrary builds libferry.so into a temporary directory (removed by
// TestMain) with the same flags as make bindings.
func buildLibrary(t *testing.T) string {
	t.Helper()
	if !cgoEnabled() {
		testutil.Skip(t, "cgo", "cgo is disabled (CGO_ENABLED=0): libferry.so is a c-shared library and needs cgo")
	}
	lib.once.Do(func() {
		lib.dir, lib.err = os.MkdirTemp("", "libferry-test-")
		if lib.err != nil {
			return
		}
		// The same build as make bindings: SONAME, symlinks, version script.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "../scripts/bindings.sh", "build", lib.dir)
		cmd.Env = append(os.Environ(), "GO="+goTool())
		if out, err := cmd.CombinedOutput(); err != nil {
			lib.err = fmt.Errorf("scripts/bindings.sh build: %v\n%s", err, out)
		}
	})
	if lib.err != nil {
		t.Fatal(lib.err)
	}
	return lib.dir
}

func TestMain(m *testing.M) {
	testutil.Main(m, nil, func() {
		if lib.dir != "" {
			os.RemoveAll(lib.dir)
		}
	})
}

// cgoEnabled asks the go command, which knows the environment and the
// toolchain's default.
func cgoEnabled() bool {
	out, err := exec.Command(goTool(), "env", "CGO_ENABLED").Output()
	return err == nil && strings.TrimSpace(string(out)) == "1"
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

// requireCC skips when there is no C compiler: the library itself was
// already built by go (which needs one for cgo), so this only happens
// with an unusual toolchain setup.
func requireCC(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		testutil.Skip(t, "cc", "no C compiler (cc) on PATH: the C example cannot be built here")
	}
	return cc
}

// compileExample builds examples/<name>.c against the library.
func compileExample(t *testing.T, name string) string {
	t.Helper()
	cc := requireCC(t)
	dir := buildLibrary(t)
	bin := filepath.Join(dir, name)
	lib.mu.Lock()
	defer lib.mu.Unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	out, err := exec.Command(cc, "-Wall", "-Wextra", "-Werror", "-O2", "-pthread", "-o", bin, "examples/"+name+".c",
		"-I.", "-L"+dir, "-lferry", "-Wl,-rpath,"+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("cc examples/%s.c: %v\n%s", name, err, out)
	}
	return bin
}

// run runs a loopback program, skipping on its exit status 77 (the
// transport cannot run here) and failing on anything else but 0.
func run(t *testing.T, name string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	pid := 0
	if cmd.Process != nil {
		pid = cmd.Process.Pid
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		t.Logf("%s", strings.TrimSpace(out.String()))
	case errors.As(err, &ee) && ee.ExitCode() == 77:
		testutil.Skip(t, "libfabric", "transport not usable on this machine: %s", strings.TrimSpace(out.String()))
	default:
		t.Fatalf("%s %q: %v\n%s", filepath.Base(name), args, err, out.String())
	}
	return out.String(), pid
}

// shmLeftovers lists the /dev/shm files of process pid (the efa provider
// names shm endpoints ferry-<pid>-...): none may outlive a clean close.
func shmLeftovers(pid int) []string {
	ents, _ := os.ReadDir("/dev/shm")
	var left []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), fmt.Sprintf("ferry-%d-", pid)) {
			left = append(left, e.Name())
		}
	}
	return left
}

// transportCase is what a C example takes as arguments: a transport, the
// node to pin it to ("-" for none) and a NIC count.
type transportCase struct{ transport, node, nics string }

// oneOfEach is each transport that runs here once, mem and tcp with 2 NICs.
var oneOfEach = []transportCase{
	{"mem", "-", "2"},
	{"ipc", "-", "1"},
	{"shm", "-", "1"},
	{"tcp;ofi_rxm", "127.0.0.1", "2"},
}

// runOverTransports runs the example bin once per case, as a subtest, with
// the case's arguments and then extra, and requires the line
// "NAME TRANSPORT: ok" the example prints on success. It returns nothing:
// each subtest fails on its own.
func runOverTransports(t *testing.T, name, bin string, cases []transportCase, extra ...string) {
	t.Helper()
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s/nics=%s", tc.transport, tc.nics), func(t *testing.T) {
			out, _ := run(t, bin, append([]string{tc.transport, tc.node, tc.nics}, extra...)...)
			if !strings.Contains(out, name+" "+tc.transport+": ok") {
				t.Fatalf("no ok line:\n%s", out)
			}
		})
	}
}

// TestCLoopback runs examples/loopback.c: two engines in one process,
// every request kind, every completion and counter kind, concurrent
// submitters, close, over the in-process and the libfabric loopback
// transports.
func TestCLoopback(t *testing.T) {
	bin := compileExample(t, "loopback")
	for _, tc := range []struct{ transport, node, nics string }{
		{"mem", "-", "1"},
		{"mem", "-", "3"},
		{"shm", "-", "1"},
		{"ipc", "-", "2"},
		{"tcp;ofi_rxm", "127.0.0.1", "2"},
	} {
		t.Run(fmt.Sprintf("%s/nics=%s", tc.transport, tc.nics), func(t *testing.T) {
			out, pid := run(t, bin, tc.transport, tc.node, tc.nics, "300")
			if !strings.Contains(out, "loopback "+tc.transport+": ok") {
				t.Fatalf("no ok line:\n%s", out)
			}
			if left := shmLeftovers(pid); len(left) > 0 {
				t.Errorf("/dev/shm files left by the loopback process: %v", left)
			}
		})
	}
}

// TestCBadInput runs examples/badinput.c: every kind of bad input is
// refused with its own code, posts nothing and leaves the engines working.
func TestCBadInput(t *testing.T) {
	runOverTransports(t, "badinput", compileExample(t, "badinput"), []transportCase{
		{"mem", "-", "1"},
		{"tcp;ofi_rxm", "127.0.0.1", "2"},
	})
}

// TestCCycles runs examples/cycles.c: ten open, write, close cycles leave
// the process's descriptors, /dev/shm files and live handles unchanged.
func TestCCycles(t *testing.T) {
	runOverTransports(t, "cycles", compileExample(t, "cycles"), oneOfEach, "10")
}

// TestCCloseRace runs examples/closerace.c: an engine closed while four
// threads submit to it and wait on it; every call works or fails with a
// closed-engine code, every thread stops, nothing is left behind.
func TestCCloseRace(t *testing.T) {
	bin := compileExample(t, "closerace")
	for _, tc := range []struct{ transport, node, nics string }{
		{"mem", "-", "2"},
		{"tcp;ofi_rxm", "127.0.0.1", "2"},
	} {
		t.Run(fmt.Sprintf("%s/nics=%s", tc.transport, tc.nics), func(t *testing.T) {
			for i := 0; i < 3; i++ {
				out, _ := run(t, bin, tc.transport, tc.node, tc.nics)
				if !strings.Contains(out, ": ok") {
					t.Fatalf("no ok line:\n%s", out)
				}
			}
		})
	}
}

// TestPythonLoopback drives the library from Python's ctypes.
func TestPythonLoopback(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		testutil.Skip(t, "python3", "no python3 on PATH: the ctypes example cannot run here")
	}
	dir := buildLibrary(t)
	for _, tr := range [][]string{{"mem"}, {"shm"}, {"tcp;ofi_rxm", "127.0.0.1"}} {
		t.Run(tr[0], func(t *testing.T) {
			args := append([]string{"examples/loopback.py", filepath.Join(dir, "libferry.so")}, tr...)
			out, _ := run(t, py, args...)
			if !strings.Contains(out, "ok") {
				t.Fatalf("no ok line:\n%s", out)
			}
		})
	}
}

// headerFunctions returns the functions ferry.h declares.
func headerFunctions(t *testing.T) []string {
	t.Helper()
	h, err := os.ReadFile("ferry.h")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^[a-z_0-9 ]+\*?(ferry_[a-z_0-9]+)\(`)
	var fns []string
	for _, m := range re.FindAllStringSubmatch(string(h), -1) {
		fns = append(fns, m[1])
	}
	slices.Sort(fns)
	return slices.Compact(fns)
}

// TestExports checks that the library exports exactly the functions
// ferry.h declares, and that libferry.map lists the same set.
func TestExports(t *testing.T) {
	want := headerFunctions(t)
	if len(want) < 40 {
		t.Fatalf("parsed only %d functions from ferry.h: %v", len(want), want)
	}
	m, err := os.ReadFile("libferry.map")
	if err != nil {
		t.Fatal(err)
	}
	mapped := regexp.MustCompile(`(?m)^\s+(ferry_[a-z_0-9]+);`).FindAllStringSubmatch(string(m), -1)
	var inMap []string
	for _, x := range mapped {
		inMap = append(inMap, x[1])
	}
	slices.Sort(inMap)
	if !slices.Equal(inMap, want) {
		t.Errorf("libferry.map lists %v\nferry.h declares %v", inMap, want)
	}
	nm, err := exec.LookPath("nm")
	if err != nil {
		testutil.Skip(t, "cc", "no nm on PATH: exported symbols not checked")
	}
	dir := buildLibrary(t)
	out, err := exec.Command(nm, "-D", "--defined-only", filepath.Join(dir, "libferry.so")).Output()
	if err != nil {
		t.Fatalf("nm: %v", err)
	}
	var got []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[1] == "T" {
			got = append(got, f[2])
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("libferry.so exports %v\nferry.h declares %v", got, want)
	}
}

// TestHeaderCompiles checks ferry.h on its own, strictly, as C99 and C++.
func TestHeaderCompiles(t *testing.T) {
	cc := requireCC(t)
	src := "#include \"ferry.h\"\nint main(void) { ferry_config c; ferry_config_init(&c); return (int)c.struct_size == 0; }\n"
	dir := t.TempDir()
	f := filepath.Join(dir, "h.c")
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-std=c99", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-fsyntax-only", "-I.", f).CombinedOutput(); err != nil {
		t.Errorf("ferry.h as C99: %v\n%s", err, out)
	}
	cxx, err := exec.LookPath("c++")
	if err != nil {
		testutil.Skip(t, "cc", "no C++ compiler: ferry.h checked as C only")
	}
	if out, err := exec.Command(cxx, "-x", "c++", "-std=c++11", "-Wall", "-Werror", "-fsyntax-only", "-I.", f).CombinedOutput(); err != nil {
		t.Errorf("ferry.h as C++: %v\n%s", err, out)
	}
}

// TestCRanks runs examples/ranks.c as two processes of one job, spawned
// the way a launcher would: they bootstrap through ferry_group_*, write
// into each other's memory and send each other a message.
func TestCRanks(t *testing.T) {
	bin := compileExample(t, "ranks")
	for _, tc := range []struct{ transport, node, nics string }{
		{"shm", "-", "1"},
		{"ipc", "-", "2"},
		{"tcp;ofi_rxm", "127.0.0.1", "2"},
	} {
		t.Run(fmt.Sprintf("%s/nics=%s", tc.transport, tc.nics), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var out bytes.Buffer
			w := &lockedBuffer{b: &out}
			err := rendezvous.Spawn(ctx, 2, []string{bin, tc.transport, tc.node, tc.nics}, nil,
				rendezvous.SpawnOptions{Stdout: w, Stderr: w})
			var se *rendezvous.SpawnError
			if errors.As(err, &se) && slices.ContainsFunc(se.Ranks, func(r rendezvous.RankExit) bool { return r.ExitCode == 77 }) {
				testutil.Skip(t, "libfabric", "transport not usable on this machine: %s", strings.TrimSpace(out.String()))
			}
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			t.Logf("%s", strings.TrimSpace(out.String()))
			for r := 0; r < 2; r++ {
				if !strings.Contains(out.String(), fmt.Sprintf("rank %d of 2 over %s: ok", r, tc.transport)) {
					t.Fatalf("rank %d did not report ok:\n%s", r, out.String())
				}
			}
		})
	}
}

// lockedBuffer collects the output of several processes.
type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// TestCOverhead runs examples/overhead.c briefly: the cost of the ABI over
// the null transport. It checks that the program works; the figures it
// logs are only meaningful from a longer run on a quiet machine.
func TestCOverhead(t *testing.T) {
	bin := compileExample(t, "overhead")
	out, _ := run(t, bin, "2000")
	if !strings.Contains(out, "0 errors") {
		t.Fatalf("unexpected output:\n%s", out)
	}
}

// TestCA2A runs examples/a2a.c: dispatch and combine through the C ABI,
// two ranks as threads, on the host backend and on the CUDA kernels'
// CPU emulator, every output checked against rows the program computes
// itself, plus bad arguments, calls out of order, the batched layout's
// overflow and a revival with ferry_a2a_set_active.
func TestCA2A(t *testing.T) {
	bin := compileExample(t, "a2a")
	for _, backend := range []string{"host", "cuda-emu"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "cuda-emu" {
				requireCXX(t)
			}
			out, _ := run(t, bin, backend)
			if !strings.Contains(out, "a2a "+backend+": ok") {
				t.Fatalf("no ok line:\n%s", out)
			}
		})
	}
}

// TestCGPU runs examples/gpu.c twice: with no CUDA driver (every GPU
// call fails with FERRY_E_NOT_SUPPORTED naming the driver) and against
// the fake libcuda the cuda package's tests build from
// cuda/testdata/fakecuda.c (GPU groups, registration through dma-buf and
// by address, bad input), so the GPU memory ABI runs without a GPU.
func TestCGPU(t *testing.T) {
	bin := compileExample(t, "gpu")
	fake := fakeCUDA(t)
	for _, tc := range []struct{ mode, driver string }{
		{"nodriver", filepath.Join(t.TempDir(), "no-libcuda.so.1")},
		{"fake", fake},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Setenv("FERRY_CUDA_DRIVER", tc.driver)
			out, _ := run(t, bin, tc.mode)
			if !strings.Contains(out, "gpu "+tc.mode+": ok") {
				t.Fatalf("no ok line:\n%s", out)
			}
		})
	}
}

// TestCA2AProcesses runs examples/a2a.c as two processes of one job over
// ferry's ipc transport: the world comes from the bootstrap group, and
// the NVLink domain of two ranks shares memory between the processes.
func TestCA2AProcesses(t *testing.T) {
	bin := compileExample(t, "a2a")
	for _, backend := range []string{"host", "cuda-emu"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "cuda-emu" {
				requireCXX(t)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			var out bytes.Buffer
			w := &lockedBuffer{b: &out}
			err := rendezvous.Spawn(ctx, 2, []string{bin, backend, "ipc"}, nil, rendezvous.SpawnOptions{Stdout: w, Stderr: w})
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			t.Logf("%s", strings.TrimSpace(out.String()))
			for r := 0; r < 2; r++ {
				if !strings.Contains(out.String(), fmt.Sprintf("a2a %s rank %d over ipc: ok", backend, r)) {
					t.Fatalf("rank %d did not report ok:\n%s", r, out.String())
				}
			}
		})
	}
}

// requireCXX skips without the C++20 compiler the cuda-emu backend builds
// its kernels with.
func requireCXX(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("g++"); err != nil && os.Getenv("FERRY_EMU_CXX") == "" {
		testutil.Skip(t, "g++", "the cuda-emu backend compiles its kernels with a C++20 compiler: none here")
	}
}

// fakeCUDA builds the fake libcuda of the cuda package's tests
// (cuda/testdata/fakecuda.c): any address is device memory of GPU 0,
// copies are memcpy, dma-bufs of page-aligned ranges are exported.
func fakeCUDA(t *testing.T) string {
	t.Helper()
	cc := requireCC(t)
	fake := filepath.Join(t.TempDir(), "libcuda.so.1")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", fake, "../cuda/testdata/fakecuda.c").CombinedOutput(); err != nil {
		t.Fatalf("build the fake driver: %v\n%s", err, out)
	}
	return fake
}

// TestCA2ACUDAMemory runs examples/a2a.c with every tensor passed as CUDA
// memory, against the fake libcuda: the library stages each through host
// memory with the driver's copies (in before the call, outputs back after
// it), and every result still matches.
func TestCA2ACUDAMemory(t *testing.T) {
	bin := compileExample(t, "a2a")
	t.Setenv("FERRY_CUDA_DRIVER", fakeCUDA(t))
	out, _ := run(t, bin, "host", "--cuda-memory")
	if !strings.Contains(out, "a2a host cuda-memory: ok") {
		t.Fatalf("no ok line:\n%s", out)
	}
}

// TestCDirectory runs examples/directory.c (ABI 1.3): publish, lookup,
// select, wait, regions, watch events and lose-on-leave, on the
// in-process directory and on a real etcd server on loopback.
func TestCDirectory(t *testing.T) {
	bin := compileExample(t, "directory")
	t.Run("mem", func(t *testing.T) {
		out, _ := run(t, bin, "mem://c-test", "mem")
		if !strings.Contains(out, "directory mem over mem: ok") {
			t.Fatalf("no ok line:\n%s", out)
		}
	})
	t.Run("etcd", func(t *testing.T) {
		srv := etcdtest.Start(t)
		url := "etcd://" + strings.TrimPrefix(srv.Client, "http://") + etcdtest.Prefix(t)
		out, _ := run(t, bin, url, "ipc")
		if !strings.Contains(out, "directory etcd over ipc: ok") {
			t.Fatalf("no ok line:\n%s", out)
		}
	})
}
