package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readmeMarker precedes the README's complete example.
const readmeMarker = "<!-- example: external module (tests/module_test.go extracts and runs this block) -->"

// TestExternalModule is a user's first hour: a fresh module requires ferry
// (a replace directive stands in for the proxy), runs the README's example
// on the in-process transport and over libfabric shm, and runs the engine
// conformance suite through fabric/fabrictest from its own tests.
func TestExternalModule(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds an external module (about a minute cold)")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(readme), readmeMarker+"\n```go\n")
	require.True(t, ok, "README.md lost its example marker")
	code, _, ok := strings.Cut(rest, "\n```")
	require.True(t, ok, "README.md example block is not closed")

	dir := t.TempDir()
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	write("go.mod", "module example.com/ferryuser\n\ngo 1.26\n\nrequire github.com/ferryrdma/ferry v0.0.0\n\n"+
		"replace github.com/ferryrdma/ferry => "+root+"\n")
	write("main.go", code+"\n")
	write("main_test.go", `package main

import (
	"testing"

	"github.com/ferryrdma/ferry/fabric/fabrictest"
)

func TestConformance(t *testing.T) {
	fabrictest.Run(t, fabrictest.Params{Transport: fabrictest.Mem, NICs: 2})
}

func TestExample(t *testing.T) {
	if err := run(t.Context(), fabrictest.Mem); err != nil {
		t.Fatal(err)
	}
}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	gotool := "go"
	if p, err := exec.LookPath("go"); err == nil {
		gotool = p
	} else if _, err := os.Stat("/usr/local/go/bin/go"); err == nil {
		gotool = "/usr/local/go/bin/go"
	}
	goCmd := func(args ...string) string {
		cmd := exec.CommandContext(ctx, gotool, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	goCmd("mod", "tidy")
	goCmd("build", "-o", "example", ".")
	for _, tr := range []string{"mem", "shm"} {
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "example"), "-transport", tr)
		out, err := cmd.Output()
		require.NoError(t, err, "example -transport %s", tr)
		require.Contains(t, string(out), tr+": 1 MiB written over 2 NICs and verified")
	}
	goCmd("test", "-count=1", ".")
}
