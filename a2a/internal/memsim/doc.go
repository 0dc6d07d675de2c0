// Package memsim runs the a2a protocol between W ranks in one process: a
// pure-Go stand-in for the transport, used to test the planner and the
// Context state machine against the oracle without NICs or GPUs.
//
// Each rank has a send buffer, a receive buffer and a count table, all Go
// byte slices. "RDMA" writes are goroutines that copy bytes into the
// target's buffer (optionally after a random delay, so they land in any
// order) and then credit one immediate to the target's counter for the tag;
// byte-sharded writes become one write per NIC slice, each with its own
// immediate, exactly as the engine's contract says. "NVLink" stores are
// direct copies into a node peer's buffers, followed by a per-peer
// data-ready signal. Receivers wait for the planner's expected counts, so a
// wrong expectation either times out or reads data before it lands, which
// the race detector reports; surplus immediates are left in the counters,
// and World.Residue reports them.
package memsim
