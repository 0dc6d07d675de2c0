package main

import (
	"bytes"
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
	js, plot := filepath.Join(dir, "out.json"), filepath.Join(dir, "out.png")

	out, errOut, code := runCommand(t, exe, "loopback", "--provider", "mem", "--sizes", "4K", "--pages", "20",
		"--iters", "2", "--buffer-mib", "8", "--json", js, "--plot", plot)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, out, "Initialized TransferEngine.")
	require.Equal(t, 3, strings.Count(out, "VERIFIED"), out)
	require.Contains(t, out, "Done!")

	b, err := os.ReadFile(js)
	require.NoError(t, err)
	var doc struct {
		Header map[string]any   `json:"header"`
		Cases  []map[string]any `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Equal(t, "loopback", doc.Header["mode"])
	require.Len(t, doc.Cases, 5)
	f, err := os.Open(plot)
	require.NoError(t, err)
	defer f.Close()
	_, err = png.Decode(f)
	require.NoError(t, err)

	// --json - keeps stdout one JSON document.
	out, errOut, code = runCommand(t, exe, "loopback", "--provider", "null", "--workloads", "paged",
		"--sizes", "64", "--pages", "1000", "--iters", "2", "--buffer-mib", "8", "--json", "-")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.True(t, json.Valid([]byte(out)), out)
	require.Contains(t, errOut, "Mpps")

	_, errOut, code = runCommand(t, exe, "loopback", "--gpus", "0")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "GPU memory needs the cuda package")

	_, errOut, code = runCommand(t, exe, "0,1", "2")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "GPU memory needs the cuda package")

	_, _, code = runCommand(t, exe, "loopback", "--workloads", "nope")
	require.Equal(t, exitUsage, code)

	out, errOut, code = runCommand(t, exe, "info")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.NotEmpty(t, out)
	out, _, code = runCommand(t, exe, "info", "--json")
	require.Equal(t, 0, code)
	require.True(t, json.Valid([]byte(out)))
}

// The ring through the command itself: --spawn re-runs the binary as three
// ranks over shm, and rank 0 prints a section per pair.
func TestCommandRanksSpawn(t *testing.T) {
	exe := buildCommand(t)
	out, errOut, code := runCommand(t, exe, "ranks", "--world-size", "3", "--spawn", "--workloads", "paged,imm",
		"--sizes", "4K", "--pages", "20", "--iters", "2", "--buffer-mib", "8")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	for _, pair := range []string{"0->1", "1->2", "2->0"} {
		require.Contains(t, out, "-- rank "+pair)
	}
	require.Equal(t, 6, strings.Count(out, "VERIFIED"), out)
	require.Contains(t, out, "world_size=3")
}
