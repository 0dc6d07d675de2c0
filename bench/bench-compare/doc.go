// Command bench-compare times the work tree against an earlier revision,
// paired: it builds fabric-debug, bench-a2a and the fabric package's test
// binary at BASE (in a temporary git worktree, removed afterwards) and in
// the work tree, then runs every case N times, alternating the two builds
// (base first in even rounds, new first in odd ones) so both see the same,
// often shared, machine. Per case it prints the medians, min and max of
// each build and the ratio new ÷ base, both of the medians and as the
// median of the per-round ratios.
//
// Usage:
//
//	bench-compare --base REV [--n 7] [--cases tcp-64M,shm-paged,...] [--poll adaptive]
//	              [--go-bench 'Null(Imm|Paged)$'] [--benchtime 1s] [--json FILE]
//	              [--callgrind 20000]
//
// Cases (--cases, default all): tcp-64M and tcp-64M-raw (tcp;ofi_rxm, one
// 64 MiB write, Gbit/s; -raw is fabric-debug --raw, libfabric's own loop),
// shm-paged and shm-paged-raw, ipc-paged, null-paged (64 B × 10000 pages,
// Mop/s), ipc-64M, a2a-host (bench-a2a, 2 ranks over shm, dispatch and
// combine p50 in µs) and go-bench (go test -bench of ./fabric, ns/op and
// allocs/op per benchmark). fabric-debug's and bench-a2a's figures are
// read from their JSON output, in either of the two formats fabric-debug
// has written (one document with "cases", or one record per line). A case
// a build cannot run (a transport it lacks, a flag it does not know) is
// skipped for that build, saying why. The engine's ceilings close the
// table: engine ÷ raw loop for tcp 64 MiB and shm paged, per build.
//
// --callgrind N adds, per fabric benchmark, the instructions per op of
// each function (self, not inclusive) under valgrind --tool=callgrind (N
// ops; N/pages iterations of a paged benchmark) for both builds, those
// that differ most first: the same on a loaded machine as on an idle
// one, unlike the timings. (The total per op is printed too, but holds
// the spinning worker's empty passes, which vary.)
//
// The poll mode (--poll, adaptive by default) goes to every fabric-debug
// run and is printed in the header; the fabric benchmarks choose their
// own (the writer spins). make bench-compare BASE=REV [N=7] runs it.
package main
