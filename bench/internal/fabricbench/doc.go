// Package fabricbench holds the measurement loops of the fabric-debug
// command, so they can be tested: the workloads of the reference tool
// (paged writes, single writes, immediate latency), the control protocol
// between a server that writes and a client that owns the destination
// and checks it, the ring of ranks bootstrapped by fabric/rendezvous, the
// raw libfabric ceiling (efa.RawBench) in the same format, and the
// outputs: a table streamed row by row and JSON lines (through package
// report, which bench-a2a shares), and a PNG chart.
//
// # What is measured
//
// The writer (the server, as in the reference) times each iteration from
// its first submit to the last completion at the writer, through the
// callback-free counter path; warmup iterations are dropped. The timed
// writes carry no immediates, as in the reference. Every case is then
// checked, the way nccl-tests checks after timing: the writer runs the
// same request once more, untimed, with an immediate on every write. On
// tcp and shm an initiator's completion does not mean the bytes are
// visible at the target, so the target counts exactly the immediates that
// pass must deliver (one per page, one per NIC shard of a single write),
// then compares every byte with the pattern the writer filled in from a
// shared seed. A destination is poisoned before each case, so stale bytes
// cannot pass. The imm case counts every immediate of every iteration.
//
// # Modes
//
// [Loopback] runs a server and a client engine in one process over the
// same protocol as two processes ([ServeSpec] and [RunClient]). [Ranks]
// runs one rank of a ring. [Raw] bypasses the engine. [Info] prints the
// machine's capability report. Every mode hands its header and each case,
// as it completes, to a [Sink] ([Printer] prints them), and returns a
// [Report] even when a case failed; the error then says which, wrapping
// [ErrVerify] for a failed check.
//
// Figures on loopback providers (shm, tcp;ofi_rxm, mem) measure the host's
// CPU and memory, and null measures only the engine's own overhead; the
// report header says so.
package fabricbench
