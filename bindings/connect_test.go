package main

import "testing"

// TestCConnect runs examples/connect.c (ABI 1.4): ferry_connect before the
// first write, again without harm, a closed engine refused in time, bad
// arguments refused.
func TestCConnect(t *testing.T) {
	runOverTransports(t, "connect", compileExample(t, "connect"), oneOfEach)
}
