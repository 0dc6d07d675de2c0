package main

import (
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/stretchr/testify/require"
)

// TestInstall: the library carries the SONAME libferry.so.1, make
// install's script puts it, ferry.h and ferry.pc under a prefix, and a C
// program built only from what pkg-config says about that prefix runs.
func TestInstall(t *testing.T) {
	dir := buildLibrary(t)
	cc := requireCC(t)
	pkgConfig, err := exec.LookPath("pkg-config")
	if err != nil {
		testutil.Skip(t, "cc", "pkg-config not on PATH (make deps installs it)")
	}
	f, err := elf.Open(filepath.Join(dir, "libferry.so"))
	require.NoError(t, err)
	sonames, err := f.DynString(elf.DT_SONAME)
	f.Close()
	require.NoError(t, err)
	require.Equal(t, []string{"libferry.so.1"}, sonames)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prefix := t.TempDir()
	out, err := exec.CommandContext(ctx, "../scripts/bindings.sh", "install", dir, prefix).CombinedOutput()
	require.NoError(t, err, "install: %s", out)
	real, err := filepath.EvalSymlinks(filepath.Join(dir, "libferry.so"))
	require.NoError(t, err)
	for _, p := range []string{"lib/" + filepath.Base(real), "lib/libferry.so.1", "lib/libferry.so", "include/ferry.h", "lib/pkgconfig/ferry.pc"} {
		_, err := os.Stat(filepath.Join(prefix, p))
		require.NoError(t, err, "installed %s", p)
	}
	pc := exec.CommandContext(ctx, pkgConfig, "--cflags", "--libs", "ferry")
	pc.Env = append(os.Environ(), "PKG_CONFIG_PATH="+filepath.Join(prefix, "lib/pkgconfig"))
	flags, err := pc.Output()
	require.NoError(t, err, "pkg-config ferry")
	require.Contains(t, string(flags), "-I"+prefix+"/include")
	require.Contains(t, string(flags), "-lferry")

	// loopback.c includes "check.h" from the examples: that is the only
	// thing taken from the source tree.
	exe := filepath.Join(t.TempDir(), "loopback")
	args := append([]string{"-Wall", "-Wextra", "-Werror", "-O2", "-pthread", "-o", exe, "examples/loopback.c"},
		strings.Fields(string(flags))...)
	args = append(args, "-Wl,-rpath,"+filepath.Join(prefix, "lib"))
	out, err = exec.CommandContext(ctx, cc, args...).CombinedOutput()
	require.NoError(t, err, "cc: %s", out)
	out, err = exec.CommandContext(ctx, exe, "mem").CombinedOutput()
	require.NoError(t, err, "installed loopback mem: %s", out)
	// The program found the installed library, by its SONAME.
	ldd, err := exec.CommandContext(ctx, "ldd", exe).Output()
	if err == nil {
		require.Contains(t, string(ldd), filepath.Join(prefix, "lib", "libferry.so.1"))
	}
}

// TestPythonPackage runs the Python package's own unittest suite
// (bindings/python/tests: constants and struct layouts against ferry.h,
// writes over mem and shm, typed errors) against a fresh libferry.
func TestPythonPackage(t *testing.T) {
	dir := buildLibrary(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		testutil.Skip(t, "python3", "python3 not on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-s", "tests", "-t", ".", "-v")
	cmd.Dir = "python"
	cmd.Env = append(os.Environ(), "FERRY_LIBRARY="+filepath.Join(dir, "libferry.so"), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "python unittest:\n%s", out)
	require.Contains(t, string(out), "OK")
	require.NotContains(t, string(out), "skipped", "a Python test skipped:\n%s", out)
}

// TestCPeers runs examples/peers.c: the failure-semantics settings of
// ferry_config, ferry_watch_peer, ferry_on_peer_lost and ferry_peer_status
// over the in-process transport (a target that closes is a lost peer).
func TestCPeers(t *testing.T) {
	bin := compileExample(t, "peers")
	out, _ := run(t, bin, "mem")
	require.Contains(t, out, "peers mem: ok")
}
