// Package host is the host-memory backend of a2a: the dispatch and combine
// protocol run by Go loops over host buffers, with ferry's TransferEngine
// (package fabric) carrying everything between NVLink domains and shared
// memory (NodeMemory) standing in for NVLink inside one.
//
// It exists so the whole protocol, every path class included, runs on
// machines with no GPU: CI runs it over the in-process "mem" provider and
// over libfabric's tcp and shm providers.
//
// Per iteration the caller's calls do what a GPU backend's kernels would
// (pack, copy, reduce, and post what needs no peer), and a worker
// goroutine does the rest, as the reference's CPU worker does:
//
//	DispatchSend  wait for the previous barrier; own count row -> the table of
//	              every other group (scatter, route tag); stage the rows for
//	              other domains (or store them into a lent mapping of the
//	              peer's receive buffer); eager scatter into the private parts
//	              (dispatch tag, sharded by peer); overflow scatter
//	              (dispatch tag, split by bytes over the NICs); then pack
//	              the rest (stage in the send buffer, or store into a node
//	              peer's receive buffer); node-dispatch signal
//	  worker      wait G-1 route immediates; PlanRecv over the table
//	DispatchRecv  wait for the plan; copy this rank's own copies (from
//	              the caller's input); wait for the node signal; copy
//	              node peers' runs; wait the planned dispatch immediates;
//	              copy remote runs; one fence for the streamed rows
//	  worker      barrier: signal every rank, wait W-1, drain own transfers
//	CombineSend   wait for the barrier; stage remote results, combine scatter
//	              (split by bytes), store node results into every replica's
//	              receive buffer; node-combine signal
//	CombineRecv   wait node and combine immediates; reduce
//	  worker      barrier, as above; the next DispatchSend waits for it
//
// Rows move as few times as the protocol allows. A copy that stays on
// its rank is never staged: DispatchRecv copies it from the caller's
// DispatchInput straight into the output, and CombineRecv's reduction
// reads the rank's own results from the CombineInput (a2a.Backend lets a
// backend read a send call's input until the matching receive call
// returns). A node peer's rows are stored straight into its receive
// buffer (push) or read from the sender's (pull). And where the fabric's
// transport lends its mapping of a peer's receive buffer (ipc:
// fabric.Engine.MapPeer, once a first write mapped it), DispatchSend packs
// that peer's eager and overflow rows, and CombineSend its results,
// straight into the rows the writes would fill, and posts the same
// writes with zero rows to carry the immediates: every row is then
// written once by its sender and read once by its receiver. The mapping
// is held only for the phase's copies, so a peer that unregisters or is
// lost is never kept waiting.
//
// Rows sit in the transport buffers at their phase's stride
// (a2a.Layout.PhaseStride), so the fabric carries each row's bytes and no
// padding up to the other phase's row size; Backend.Traffic counts what
// the writes carried. Rows of a kilobyte or more are copied with
// streaming (non-temporal) stores where the CPU has them (rows.Copy): a
// phase writes megabytes that another core or process reads next. They
// are fenced once per batch (rows.Fence), before the signal, post or
// return that publishes them, not once per row. The
// reduction runs the widest vector loop the CPU has (AVX-512 or AVX2 on
// amd64; the pure Go loop elsewhere and with the purego build tag), bit
// for bit the oracle's rounding, and may split its tokens over
// Options.ReduceThreads goroutines where the rank's share of the CPUs
// has them.
//
// Over a transport that lends its mappings (ipc), the signals need no
// engine either: each rank's count table ends in a doorbell area, one
// line per peer, and a rank stores its count row into each peer's table
// itself, then a sequence-numbered word saying so; the signals that rows
// are written (dispatch, combine, node) and the barriers' signals are such
// words too (package a2a/internal/wire, doorbell.go). A wait spins
// briefly, then sleeps on the peer-written doorbell word (a futex on the
// shared page), and takes whatever still comes as immediates through the
// engine (the first writes, before a mapping is lent) alike; it checks
// its deadline and the engine's lost ranks between naps, so a dead peer
// still ends it with an *a2a.RankError. Every wait then costs the other
// ranks' lateness, not two engine workers' handoffs and polls. An
// iteration with every mapping lent posts nothing to the engine. Where
// the ranks outnumber the CPUs (of the rank with fewest; each rank's count
// travels with its descriptors, so all decide alike), doorbells and the
// shared tokens below stay off unless Options.Doorbells says otherwise:
// ranks that take turns on cores wait better asleep on the engine.
//
// Where a rank stores its dispatch rows straight into a receiver's memory
// (a node peer's receive buffer, or one the transport lends), it stores
// each token bound for that receiver once, in free rows of its window
// there, and each copy's slot holds only the number of its token's row
// (tokens.go): top-K routing sends a token to several experts of one
// rank, so the bytes written shrink by about that factor, and the
// receiver reads each token's row once. While the token rows every rank
// of the host stores in a phase fit in half the CPU's shared cache
// (rows.SharedCacheBytes; decode batches do), they are stored with cached
// stores, not streamed, so the receiver finds them in that cache. Only a
// cache every online CPU shares counts: where the last-level cache is
// split per core complex, ranks may run on cores that do not share one,
// and the rows stream. The
// receiver then writes each copy into its output once, as a single copy
// would; reading the rows straight out of the sender's input instead
// (process_vm_readv, as Open MPI's CMA does) ran at a quarter to a half
// of a streamed copy's rate on the machine measured (6-13 GB/s against
// 25-30), so rows go through the receive buffer.
//
// A barrier waits for the completion of every transfer this rank posted,
// so a buffer is reused only after the NIC is done reading it and every
// peer is done reading what this rank exposed. Receive calls return as
// soon as this rank's own data is in: the barrier runs in the background
// and gates the next send.
//
// Every wait for other ranks, in the calls and in the worker, ends within
// Options.Timeout. Each immediate counter watches every other rank
// (fabric.ImmCounter.Watch), so when the engine declares a rank lost (its
// process died, its connection broke, it stopped answering heartbeats)
// the waits end at once with an *a2a.RankError naming it (errors.Is
// a2a.ErrPeerLost); a wait that times out says which ranks are known
// lost. Either leaves the context broken, as every backend failure does,
// until the survivors take a membership without the rank
// (a2a.Context.SetActiveRanks): the backend then stops its worker, waits
// for its own transfers (those to the lost rank fail), moves its counters
// to the new generation's immediate values, rewires targets, signals and
// watches to the active ranks, and meets the other members twice before
// it runs again. A restarted rank comes back with a backend built with
// Options.Join, even when ranks of its domain stayed active: with a
// NodeRejoiner for node memory (LocalNode, ProcessNode) it allocates its
// buffers alone, and during the membership change, once every member is
// quiet, the active members of its domain map its new buffers in place
// of its dead incarnation's (unmapping those) and it maps theirs, the
// names needed riding on the membership's descriptor exchange (see
// NodeRejoiner). A member that does not come fails the change within its
// context, with an error wrapping a2a.ErrTimeout. (The CUDA backend keeps
// the older rule: its node peers' buffers are mapped once, so a rank
// comes back there only when its whole domain restarts with it.)
package host
