// Package workload draws random a2a worlds and inputs, computes what the
// oracle says they must produce, and checks one rank's results against it.
// It does not import testing, so the benchmark program can check its runs
// with it; package a2atest builds the test harness on it.
package workload
