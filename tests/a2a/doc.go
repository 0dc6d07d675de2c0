// Package a2a (directory tests/a2a) holds the multi-process tests of MoE
// dispatch and combine: the test binary re-executes itself as every rank
// of a job (fabric/rendezvous/rendezvoustest), each rank runs the host
// backend (package a2a/host) over a real libfabric provider on loopback
// (shm or tcp;ofi_rxm), node peers share memfd mappings, and every rank
// checks its results against the oracle (package a2a/reference).
//
// Between phases, once every rank is idle, each rank poisons its own
// transport buffers, so a backend that read data it had not waited for
// (or relied on what an earlier phase left behind) fails loudly. The runs
// also misuse the call order on the real backend, pass zero tokens, and
// record which copy paths the planner chose, so a test knows that every
// path class it expects was carried.
//
// go test runs a fast subset; FERRY_A2A_FULL=1 (make test-a2a-full) runs
// the whole matrix: W in {2, 4, 8} over shm and tcp, D in {1, 2}, every
// combine type.
package a2a
