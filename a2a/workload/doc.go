// Package workload draws random a2a worlds and inputs, computes what the
// oracle says they must produce, and checks one rank's results against it.
// It does not import testing, so the benchmark program (bench-a2a) can
// check its runs with it; the a2a tests' harness (a2a/internal/a2atest)
// builds on it.
package workload
