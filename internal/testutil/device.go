package testutil

import "testing"

// RequireCUDA returns the device context a GPU test runs on, or skips tb
// with the reason where the machine has none (a failure instead under
// FERRY_TEST_REQUIRE=cuda). probe says whether a driver and device are
// there: nil, or an error wrapping ErrNotSupported that says why not.
// open then opens the context; its failure fails tb, since a machine with
// a device must be able to use it. At cleanup the context must close
// cleanly: an error there (ErrBusy) means the test leaked device memory,
// streams or modules.
//
// The cuda package is passed in, not imported, so that cuda's own tests
// can use this too (internal/testutil/cudatest wraps it for the others).
func RequireCUDA[C interface{ Close() error }](tb testing.TB, probe func() error, open func() (C, error)) C {
	tb.Helper()
	SkipIfNotSupported(tb, "cuda", probe())
	c, err := open()
	if err != nil {
		tb.Fatalf("open device context: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("context close at cleanup (leaked objects?): %v", err)
		}
	})
	return c
}
