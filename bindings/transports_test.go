package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// TestTransportNamesAgree: every entry point maps the same transport
// names to the same providers: fabric-debug, bench-a2a, libferry (through
// ferry_transports, called from Python's ctypes) and a Go program that
// imports ferry/providers (this test binary, as libferry's package).
func TestTransportNamesAgree(t *testing.T) {
	dir := buildLibrary(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		testutil.Skip(t, "python3", "python3 not on PATH: needed to call ferry_transports through ctypes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := t.TempDir()
	for _, tool := range []string{"fabric-debug", "bench-a2a"} {
		out, err := exec.CommandContext(ctx, goTool(), "build", "-o", filepath.Join(bin, tool), "../bench/"+tool).CombinedOutput()
		require.NoError(t, err, "go build %s: %s", tool, out)
	}
	run := func(name string, args ...string) string {
		out, err := exec.CommandContext(ctx, name, args...).Output()
		require.NoError(t, err, "%s %v", name, args)
		return string(out)
	}
	var want strings.Builder
	for _, tr := range fabric.Transports() {
		want.WriteString(tr.Name + "\t" + tr.Provider + "\n")
	}
	require.Contains(t, want.String(), "verbs\tverbs\n", "ferry's verbs package serves \"verbs\"")
	require.Contains(t, want.String(), "shm\tlibfabric\n")
	require.Contains(t, want.String(), "mem\tmem\n")
	require.Equal(t, want.String(), run(filepath.Join(bin, "fabric-debug"), "transports"), "fabric-debug")
	require.Equal(t, want.String(), run(filepath.Join(bin, "bench-a2a"), "--list-transports"), "bench-a2a")
	script := `import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
n = ctypes.c_size_t(0)
buf = ctypes.create_string_buffer(8192)
rc = lib.ferry_transports(buf, ctypes.c_size_t(len(buf)), ctypes.byref(n))
assert rc == 0, rc
sys.stdout.write(buf.value.decode())
`
	require.Equal(t, want.String(), run(py, "-c", script, filepath.Join(dir, "libferry.so")), "libferry")
}
