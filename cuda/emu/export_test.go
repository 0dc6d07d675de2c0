package emu

import "testing"

// TSanCopyScan builds the ThreadSanitizer scenarios with defines, runs
// copy_scan alone, and returns the races reported, whether a check failed,
// and the output (for the mutation test in package emu_test).
func TSanCopyScan(t *testing.T, defines ...string) (races int, failed bool, out string) {
	r := runTSan(t, buildTSan(t, t.TempDir(), defines...), "copy_scan")
	return r.races, r.failed, r.out
}
