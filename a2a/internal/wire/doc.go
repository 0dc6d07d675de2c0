// Package wire is the fabric side of an a2a backend, shared by the host
// backend (package a2a/host) and the CUDA backend (package a2a/cudabackend): the
// descriptor exchange, the immediate counters, and the transfers of one
// iteration, posted exactly as the planner counts them.
//
//   - one Scatter per phase and kind: the count rows (route tag, sharded
//     by peer), the eager writes (dispatch tag, sharded by peer), the
//     overflow writes and the combine writes (dispatch and combine tags,
//     split by bytes over every NIC), zero-length targets included;
//   - one Barrier per signal: node-dispatch and node-combine to the node
//     peers, dispatch- and combine-barrier to every other rank;
//   - one counter per tag: a credit ImmCounter, or a FlagCounter for the
//     tags a kernel waits on;
//   - doorbells (doorbell.go, Options.Doorbells): where the transport
//     lends its mapping of a peer's count table (ipc), a signal of any
//     tag is a word stored there instead of a write, and a count row is
//     stored there too; waits count both;
//   - a TransferCounter drained at each barrier, so a buffer is reused
//     only after every request that read it completed;
//   - membership changes (members.go): every target, signal, watch and
//     wait covers the active ranks only, each generation counts in its
//     own bank of immediate values, and a change runs Quiesce, SetActive
//     (join phase 1) and Joined (join phase 2).
//
// A Wiring is used by one goroutine at a time (the backend hands it from
// the caller's calls to its worker through its own synchronisation).
package wire
