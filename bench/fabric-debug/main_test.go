package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/internal/testutil"
)

// built is the fabric-debug binary the tests share, in a directory
// TestMain removes.
var built struct {
	sync.Mutex
	dir, exe string
}

func TestMain(m *testing.M) {
	testutil.Main(m, nil, func() {
		if built.dir != "" {
			os.RemoveAll(built.dir)
		}
	})
}

// buildCommand builds fabric-debug once for the tests that run it as a
// user would.
func buildCommand(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the command")
	}
	built.Lock()
	defer built.Unlock()
	if built.exe != "" {
		return built.exe
	}
	dir, err := os.MkdirTemp("", "fabric-debug-test")
	require.NoError(t, err)
	built.dir = dir
	exe := filepath.Join(dir, "fabric-debug")
	out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	built.exe = exe
	return exe
}

func runCommand(t *testing.T, exe string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

func TestCommand(t *testing.T) {
	exe := buildCommand(t)
	dir := t.TempDir()
	js, plot := filepath.Join(dir, "out.jsonl"), filepath.Join(dir, "out.png")

	out, errOut, code := runCommand(t, exe, "loopback", "--provider", "mem", "--sizes", "4K", "--pages", "20",
		"--iters", "2", "--buffer-mib", "8", "--json", js, "--plot", plot)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.True(t, strings.HasPrefix(out, "# fabric-debug loopback\n# engine:   provider=mem transport=mem (explicit)"), out)
	require.Contains(t, out, "# verified: yes = ")
	require.Equal(t, 3, strings.Count(out, " yes\n"), out)
	require.Contains(t, out, "# done: 3 cases, 3 verified, 0 failed")

	b, err := os.ReadFile(js)
	require.NoError(t, err)
	recs := jsonLines(t, b)
	require.Len(t, recs, 5)
	require.Equal(t, "begin", recs[0]["type"])
	require.Equal(t, "loopback", recs[0]["setup"].(map[string]any)["mode"])
	require.Equal(t, "end", recs[4]["type"])
	f, err := os.Open(plot)
	require.NoError(t, err)
	defer f.Close()
	_, err = png.Decode(f)
	require.NoError(t, err)

	// --json - keeps stdout JSON lines only; the table goes to stderr.
	out, errOut, code = runCommand(t, exe, "loopback", "--provider", "null", "--workloads", "paged",
		"--sizes", "64", "--pages", "1000", "--iters", "2", "--buffer-mib", "8", "--json", "-")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Len(t, jsonLines(t, []byte(out)), 3)
	require.Contains(t, errOut, "Mop/s")
	require.Contains(t, errOut, "# verified: no case is checked")

	// Unequal groups, both ways, every case verified (bytes and the
	// immediate count fabric.ExpectedImms gives).
	for _, nm := range [][2]string{{"1", "4"}, {"4", "1"}} {
		out, errOut, code = runHere("loopback", "--provider", "mem", "--nics", nm[0], "--target-nics", nm[1],
			"--sizes", "4K,100K", "--pages", "20", "--iters", "2", "--buffer-mib", "8")
		require.Equal(t, 0, code, "%s to %s nics: stderr: %s", nm[0], nm[1], errOut)
		require.Contains(t, out, "# done: 5 cases, 5 verified, 0 failed", "%s to %s nics", nm[0], nm[1])
	}
	_, errOut, code = runHere("loopback", "--provider", "mem", "--target-nics", "5")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "5 target nics")

	out, errOut, code = runCommand(t, exe, "info")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.NotEmpty(t, out)
	out, _, code = runCommand(t, exe, "info", "--json")
	require.Equal(t, 0, code)
	require.True(t, json.Valid([]byte(out)))
}

func jsonLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), "line %q", l)
		recs = append(recs, m)
	}
	return recs
}

// runHere runs the command in this process.
func runHere(args ...string) (stdout, stderr string, code int) {
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return o.String(), e.String(), code
}

// The command line's own errors: help once, unknown commands named, one
// program-name prefix, the same default transport everywhere.
func TestCommandLine(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"loopback", "-h"}, {"help"}, {"serve", "--help"}} {
		out, errOut, code := runHere(args...)
		require.Equal(t, exitOK, code, "%v", args)
		require.Empty(t, out)
		require.Equal(t, 1, strings.Count(errOut, "usage:"), "%v prints the usage once:\n%s", args, errOut)
	}

	_, errOut, code := runHere("lopback")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, `unknown command "lopback"`)
	require.Contains(t, errOut, "loopback, serve, client, ranks, info, transports, flood-while-register, help")

	_, errOut, code = runHere("loopback", "--provider", "mem", "--nics", "9")
	require.Equal(t, exitUsage, code)
	require.Equal(t, 1, strings.Count(errOut, "fabric-debug:"), errOut)
	require.Contains(t, errOut, "9 nics")

	_, _, code = runHere("loopback", "--workloads", "nope")
	require.Equal(t, exitUsage, code)

	// Every subcommand defaults to auto.
	for _, cmd := range []string{"loopback", "serve", "client", "ranks"} {
		_, errOut, _ := runHere(cmd, "-h")
		require.Regexp(t, `-transport string\s+transport: auto, [^\n]*\(default "auto"\)`, errOut, cmd)
		require.Regexp(t, `-provider string\s+alias of --transport`, errOut, cmd)
	}
}

// The ring through the command itself: --spawn re-runs the binary as three
// ranks over shm, and rank 0 prints every pair's row of each case.
func TestCommandRanksSpawn(t *testing.T) {
	exe := buildCommand(t)
	out, errOut, code := runCommand(t, exe, "ranks", "--world-size", "3", "--spawn", "--provider", "shm",
		"--workloads", "paged,imm", "--sizes", "4K", "--pages", "20", "--iters", "2", "--buffer-mib", "8")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	for _, pair := range []string{"0->1", "1->2", "2->0"} {
		require.Regexp(t, `(?m)^  paged +`+pair+` .* yes$`, out)
		require.Regexp(t, `(?m)^  imm +`+pair+` .* yes$`, out)
	}
	require.Contains(t, out, "world_size=3")
	require.Contains(t, out, "# done: 6 cases, 6 verified, 0 failed")
}

// TestGPUMemory: --gpus, --host-memory=false and the positional GPUS form
// register GPU memory through fabric/gpu. Where no CUDA driver loads they
// fail naming the missing driver; against the fake libcuda of the cuda
// tests (which hands out host memory as "device" memory, which the
// in-process mem transport can carry) a verified loopback runs end to
// end: engine with a GPU group, registration through dma-buf or by
// address, patterns copied in and out of the device buffer.
func TestGPUMemory(t *testing.T) {
	exe := buildCommand(t)
	t.Setenv("FERRY_CUDA_DRIVER", filepath.Join(t.TempDir(), "no-libcuda.so.1"))
	for _, args := range [][]string{
		{"loopback", "--provider", "mem", "--gpus", "0"},
		{"loopback", "--provider", "mem", "--host-memory=false"},
		{"loopback", "--provider", "mem", "--gpus", "0", "--gpu-placement", "first"},
		{"0,1", "2", "--provider", "mem"},
	} {
		_, errOut, code := runCommand(t, exe, args...)
		require.NotEqual(t, 0, code, "%v", args)
		require.Contains(t, errOut, "gpu", "%v", args)
		require.Contains(t, errOut, "no-libcuda.so.1", "%v: the error names the driver it could not load", args)
		require.NotContains(t, errOut, "needs the cuda package", "%v", args)
	}
	// info asks the CUDA driver for dma-buf support: without one it says so.
	info, errOut, code := runCommand(t, exe, "info")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, info, "dma-buf")
	require.NotContains(t, info, "CUDA not linked")

	_, errOut, code = runCommand(t, exe, "loopback", "--provider", "mem", "--gpus", "0", "--gpu-placement", "nearest")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, `gpu placement "nearest"`)

	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler to build the fake CUDA driver with")
	}
	fake := filepath.Join(t.TempDir(), "libcuda.so.1")
	out, err := exec.Command(cc, "-shared", "-fPIC", "-o", fake, "../../cuda/testdata/fakecuda.c").CombinedOutput()
	require.NoError(t, err, "build the fake driver: %s", out)
	t.Setenv("FERRY_CUDA_DRIVER", fake)
	info, _, code = runCommand(t, exe, "info")
	require.Equal(t, 0, code)
	require.Contains(t, info, "Fake GPU A")
	if !strings.Contains(info, "< 5.12") {
		require.Contains(t, info, "every GPU reports dma-buf support", "the fake driver's attribute, read through the cuda package")
	}
	stdout, errOut, code := runCommand(t, exe, "loopback", "--provider", "mem", "--gpus", "0", "--gpu-placement", "first",
		"--verify", "--workloads", "single,paged", "--sizes", "4K", "--pages", "8", "--iters", "2", "--buffer-mib", "4")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout, errOut)
	require.Contains(t, stdout+errOut, "verified")
	require.NotContains(t, stdout+errOut, "not verified")
}
