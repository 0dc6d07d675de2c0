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
	"testing"

	"github.com/stretchr/testify/require"
)

// buildCommand builds fabric-debug once for the tests that run it as a
// user would.
func buildCommand(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the command")
	}
	exe := filepath.Join(t.TempDir(), "fabric-debug")
	out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
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

	_, errOut, code = runCommand(t, exe, "loopback", "--gpus", "0")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "GPU memory needs the cuda package")

	_, errOut, code = runCommand(t, exe, "0,1", "2")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "GPU memory needs the cuda package")

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
	require.Contains(t, errOut, "loopback, serve, client, ranks, info, transports, help")

	_, errOut, code = runHere("loopback", "--provider", "mem", "--nics", "9")
	require.Equal(t, exitUsage, code)
	require.Equal(t, 1, strings.Count(errOut, "fabric-debug:"), errOut)
	require.Contains(t, errOut, "9 nics")

	_, _, code = runHere("loopback", "--workloads", "nope")
	require.Equal(t, exitUsage, code)

	// Every subcommand defaults to auto.
	for _, cmd := range []string{"loopback", "serve", "client", "ranks"} {
		_, errOut, _ := runHere(cmd, "-h")
		require.Regexp(t, `-provider string\s+transport: auto, [^\n]*\(default "auto"\)`, errOut, cmd)
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
