package cudatest

import (
	"testing"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// Context returns device 0's primary context, or skips tb with the reason
// where there is no usable driver or device (a failure instead under
// FERRY_TEST_REQUIRE=cuda); at cleanup the context must close cleanly.
func Context(tb testing.TB) *cuda.Context {
	tb.Helper()
	return testutil.RequireCUDA(tb, Probe, PrimaryContext)
}

// Probe is nil where the driver loads and device 0 exists, or an error
// wrapping ErrNotSupported that says why not.
func Probe() error {
	if err := cuda.Init(); err != nil {
		return err
	}
	_, err := cuda.GetDevice(0)
	return err
}

// PrimaryContext opens device 0's primary context.
func PrimaryContext() (*cuda.Context, error) {
	dev, err := cuda.GetDevice(0)
	if err != nil {
		return nil, err
	}
	return dev.PrimaryContext()
}
