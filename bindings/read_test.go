package main

import "testing"

// TestCRead runs examples/read.c (ABI 1.5): single, paged and scatter
// reads checked byte for byte, a write-only region refused with
// FERRY_E_NOT_READABLE where the transport checks, bad input refused,
// and ferry_expected_imms against the immediates a write delivers.
func TestCRead(t *testing.T) {
	runOverTransports(t, "read", compileExample(t, "read"), oneOfEach)
}
