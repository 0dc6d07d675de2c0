package emu

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"
)

// tsanSources are the files the ThreadSanitizer scenarios include, by
// their path from this package.
var tsanSources = []string{
	"testdata/tsan_scenarios.cpp", "testdata/emu_kernels.cu",
	"../../cuda/kernels/flags.cu", "../../fabric/gpu/kernels/gpu.cu",
}

// buildTSan compiles testdata/tsan_scenarios.cpp with -fsanitize=thread
// and the given -D definitions into dir.
func buildTSan(t *testing.T, dir string, defines ...string) string {
	t.Helper()
	cxx, err := gxx()
	if err != nil {
		testutil.Skip(t, "cudaemu", "ThreadSanitizer scenarios not built: %v", err)
	}
	if err := writeHeaders(dir); err != nil {
		t.Fatal(err)
	}
	for _, src := range tsanSources {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(src)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "tsan_scenarios")
	args := []string{"-std=c++20", "-O1", "-g", "-fsanitize=thread", "-pthread", "-ffp-contract=off", "-fno-strict-aliasing",
		"-Wno-tsan", "-I", dir, "-o", bin, filepath.Join(dir, "tsan_scenarios.cpp")}
	for _, d := range defines {
		args = append(args, "-D"+d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cxx, args...).CombinedOutput(); err != nil {
		t.Fatalf("g++ -fsanitize=thread: %v\n%s", err, out)
	}
	return bin
}

// tsanRun is what one run of the scenarios showed.
type tsanRun struct {
	races  int  // ThreadSanitizer reports
	failed bool // a functional check failed, or the program did
	out    string
}

func runTSan(t *testing.T, bin string, args ...string) tsanRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "TSAN_OPTIONS=halt_on_error=0 exitcode=66")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	r := tsanRun{out: out.String()}
	r.races = strings.Count(r.out, "WARNING: ThreadSanitizer: data race")
	r.failed = strings.Contains(r.out, "FAIL") || (err != nil && r.races == 0)
	if ctx.Err() != nil {
		t.Fatalf("tsan scenarios timed out:\n%s", tail(r.out))
	}
	return r
}

func tail(s string) string {
	if len(s) > 6000 {
		return "...\n" + s[len(s)-6000:]
	}
	return s
}

// TestThreadSanitizer runs the kernel scenarios (copy_scan on two ranks,
// a host-released relay, grid barriers, and ferry's flag, watcher and
// epoch kernels against host threads) built with ThreadSanitizer: every
// CUDA thread is a TSan fiber, so a race between two threads of a block,
// two blocks, two ranks or a kernel and the host is reported. It must be
// clean.
func TestThreadSanitizer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	bin := buildTSan(t, t.TempDir(), "EMU_BLOCK=128")
	r := runTSan(t, bin)
	if r.races > 0 || r.failed || !strings.Contains(r.out, "tsan scenarios: 0 failures") {
		t.Fatalf("ThreadSanitizer scenarios: %d races, failed %v:\n%s", r.races, r.failed, tail(r.out))
	}
}
