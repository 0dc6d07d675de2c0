package tests

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestExamplesStandalone holds examples/README.md's promise that each worked
// program is a starting point a user can take away: every Go directory under
// examples/ is copied alone into a fresh module that requires ferry (a
// replace directive stands in for the proxy), and go build and go vet (which
// compiles its tests too) must pass there. An import of an internal package
// of this repository, or of a file outside the directory, fails it.
func TestExamplesStandalone(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds each example as an external module")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	entries, err := os.ReadDir(filepath.Join(root, "examples"))
	require.NoError(t, err)
	var dirs []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		gofiles, err := filepath.Glob(filepath.Join(root, "examples", e.Name(), "*.go"))
		require.NoError(t, err)
		if len(gofiles) > 0 {
			dirs = append(dirs, e.Name())
		}
	}
	// The four programs the README documents are there at least; a new one
	// is picked up by the loop above.
	for _, want := range []string{"kv-stream", "pipeline-ring", "tensor-moves", "weight-transfer"} {
		require.Contains(t, dirs, want, "examples/%s", want)
	}
	for _, name := range dirs {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, filepath.Join(root, "examples", name), dir)
			mod := "module example.com/" + name + "\n\ngo 1.26\n\nrequire github.com/ferryrdma/ferry v0.0.0\n\n" +
				"replace github.com/ferryrdma/ferry => " + root + "\n"
			require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			goCmd := func(args ...string) {
				t.Helper()
				cmd := exec.CommandContext(ctx, goTool(), args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "examples/%s copied alone: go %s:\n%s", name, strings.Join(args, " "), out)
			}
			goCmd("mod", "tidy")
			goCmd("build", "-o", filepath.Join(t.TempDir(), name), ".")
			goCmd("vet", ".")
		})
	}
}

// copyDir copies the regular files of src (recursively) into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	require.NoError(t, err)
}
