package cuda

import (
	_ "embed"
	"testing"

	"github.com/ferryrdma/ferry/internal/testutil"
)

//go:embed testdata/test_kernels.cu
var testKernelsCode string

// requireCUDA returns device 0's primary context, or skips the test with
// the reason when there is no usable driver or device. At cleanup the
// context must close cleanly: an ErrBusy there means the test leaked
// memory, streams or modules.
//
// These tests are in package cuda, which internal/testutil/cudatest
// imports, so they pass testutil.RequireCUDA the package's calls directly.
func requireCUDA(tb testing.TB) *Context {
	tb.Helper()
	return testutil.RequireCUDA(tb, func() error {
		if err := Init(); err != nil {
			return err
		}
		_, err := GetDevice(0)
		return err
	}, func() (*Context, error) {
		dev, err := GetDevice(0)
		if err != nil {
			return nil, err
		}
		return dev.PrimaryContext()
	})
}

// testModule compiles the test kernels (cached under dir, or a temp dir).
func testModule(tb testing.TB, c *Context) *Module {
	tb.Helper()
	_, _, err := NVRTCVersion()
	testutil.SkipIfNotSupported(tb, "nvrtc", err)
	m, _, err := c.CompileModule(Source{Name: "test_kernels.cu", Code: testKernelsCode}, CompileOptions{CacheDir: tb.TempDir()})
	if err != nil {
		tb.Fatalf("compile test kernels: %v", err)
	}
	tb.Cleanup(func() { m.Close() })
	return m
}

func flagsModule(tb testing.TB, c *Context) *Module {
	tb.Helper()
	_, _, err := NVRTCVersion()
	testutil.SkipIfNotSupported(tb, "nvrtc", err)
	src, err := KernelSource("flags.cu")
	if err != nil {
		tb.Fatal(err)
	}
	m, _, err := c.CompileModule(src, CompileOptions{CacheDir: tb.TempDir()})
	if err != nil {
		tb.Fatalf("compile flags.cu: %v", err)
	}
	tb.Cleanup(func() { m.Close() })
	return m
}

// try(f()).must(tb) unwraps a (value, error) pair, failing tb on error.
func try[T any](v T, err error) result[T] { return result[T]{v, err} }

type result[T any] struct {
	v   T
	err error
}

func (r result[T]) must(tb testing.TB) T {
	tb.Helper()
	if r.err != nil {
		tb.Fatal(r.err)
	}
	return r.v
}

func check(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

func pattern(seed uint32, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(uint32(i)*2654435761>>24) ^ byte(seed)
	}
	return b
}
