//go:build cgo

package emu_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/cuda/emu"
)

// TestNoCompiler: a FERRY_EMU_CXX that names no file, or a compiler that
// rejects -std=c++20, is "not supported" (errors.Is ErrNotSupported),
// and the error names the compiler, both from Compiler and from Build.
func TestNoCompiler(t *testing.T) {
	src := []cuda.Source{{Name: "k.cu", Code: `extern "C" __global__ void k(int *p) { p[0] = 1; }`}}
	build := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		m, err := emu.Build(ctx, emu.BuildSpec{Sources: src, CacheDir: t.TempDir()})
		if err == nil {
			m.Close()
		}
		return err
	}
	t.Run("missing", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "no-such-g++")
		t.Setenv("FERRY_EMU_CXX", missing)
		_, err := emu.Compiler()
		if !errors.Is(err, emu.ErrNotSupported) || !strings.Contains(err.Error(), missing) {
			t.Fatalf("Compiler: %v, want ErrNotSupported naming %s", err, missing)
		}
		err = build()
		if !errors.Is(err, emu.ErrNotSupported) || !strings.Contains(err.Error(), missing) {
			t.Fatalf("Build: %v, want ErrNotSupported naming %s", err, missing)
		}
	})
	t.Run("no-c++20", func(t *testing.T) {
		old := filepath.Join(t.TempDir(), "old-g++")
		script := "#!/bin/sh\necho \"g++: error: unrecognized command-line option '-std=c++20'\" >&2\nexit 1\n"
		if err := os.WriteFile(old, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("FERRY_EMU_CXX", old)
		err := build()
		if !errors.Is(err, emu.ErrNotSupported) || !strings.Contains(err.Error(), old) {
			t.Fatalf("Build: %v, want ErrNotSupported naming %s", err, old)
		}
	})
}
