package emu_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/cuda/emu"
)

// emuModule builds testdata/emu_kernels.cu (cached across runs), or skips
// when this machine cannot (no g++, or no cgo).
func emuModule(tb testing.TB, defines ...string) *emu.Module {
	tb.Helper()
	return testdataModule(tb, "emu_kernels.cu", defines...)
}

// testdataModule builds testdata/file.
func testdataModule(tb testing.TB, file string, defines ...string) *emu.Module {
	tb.Helper()
	code, err := os.ReadFile("testdata/" + file)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	m, err := emu.Build(ctx, emu.BuildSpec{Sources: []cuda.Source{{Name: file, Code: string(code)}}, Defines: defines})
	if errors.Is(err, emu.ErrNotSupported) {
		testutil.Skip(tb, "cudaemu", "emulator not available here: %v", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Close() })
	return m
}

func kernel(tb testing.TB, m *emu.Module, name string) *emu.Kernel {
	tb.Helper()
	k, err := m.Kernel(name)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func alloc(tb testing.TB, n int) *emu.Memory {
	tb.Helper()
	m, err := emu.Alloc(n)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { m.Free() })
	return m
}

func syncStream(tb testing.TB, s *emu.Stream, d time.Duration) error {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return s.Sync(ctx)
}

// statusOK is FD_STATUS_OK of ferry_device.h.
const statusOK = 1

func newStream(tb testing.TB) *emu.Stream {
	s := emu.NewStream()
	tb.Cleanup(func() { s.Close() })
	return s
}
