// Package a2a is Mixture-of-Experts dispatch and combine for expert
// parallelism: every rank sends each of its tokens to the K ranks that own
// the token's experts (dispatch), the experts run, and the results travel
// back and are summed with the gate weights (combine).
//
// # Pieces
//
//   - Config and Layout: the world (W ranks, NVLink domains of S ranks,
//     replica groups of D ranks, NICs per rank), the token shape and types,
//     the experts, the private window, and every size derived from them.
//     Validation returns a *ConfigError (errors.Is ErrInvalidConfig).
//   - Planner: pure Go, allocation-free once built. PlanSend lays out a
//     rank's copies expert-sorted and picks each copy's path (self, node
//     push, node pull, RDMA eager into the private window, RDMA overflow)
//     and lists its RDMA writes; PlanRecv turns the exchanged count table
//     into receive runs, combine writes and expected immediate counts.
//   - Context: the per-rank call-order state machine (DispatchSend,
//     DispatchRecv, CombineSend, CombineRecv) over a Backend, the piece that
//     moves bytes. Misuse returns ErrCallOrder, never a deadlock.
//   - The oracle, package reference, computes the expected results directly.
//   - BF16/FP16 conversions with round-to-nearest-even, used by combine.
//
// # Semantics
//
// Each routing entry (token t, slot k) is one transported row and one output
// row; nothing is de-duplicated. A token's K experts must differ. Rank r
// owns experts [r*L, (r+1)*L) with L = ceil(E/W) (the last ranks may own
// fewer, or none). Dispatch output is expert-major: local expert i's rows
// start at a multiple of ExpertPadding, groups in the receiver's visiting
// order, then token-major. In the batched layout (Config.MaxTokensPerExpert
// B > 0) local expert i's rows start at i*B instead, and a dispatch that
// gives any expert more than B copies fails on every rank with
// ErrExpertOverflow. Combine sums w*y over k in column order in fp32
// (each step rounded, no FMA) and rounds once into CombineType.
//
// # Data movement
//
// Every rank has a send buffer and a receive buffer (Layout.SendBytes,
// RecvBytes; room for rows of Layout.Stride bytes, the larger phase's row;
// each phase lays its rows at its own stride, Layout.PhaseStride, so
// writes carry no padding: backends that count their writes report them
// as a2a.Traffic) and a count table of G rows of
// Layout.RowWords uint32 words: each group's per-expert counts followed by
// the start of every rank's segment in its layout (SendPlan.Row).
// With h = Group(r), M = Layout.Private, V = Layout.MaxCopiesFrom
// (T*min(K, L), the most one group can send one rank) and j the index of a
// copy among everything h sends rank q (the expert-sorted order):
//
//	receive buffer rows [h*V, h*V+M)     group h's private part: pushed (node) or eager (RDMA)
//	receive buffer rows [h*V+M, h*V+V)   group h's overflow (RDMA; node overflow is pulled)
//	send buffer rows [0, m*K)            this rank's copies, expert-sorted (staged rows)
//
// Windows are static, so a sender places every row without knowing any
// other group's counts: eager and overflow writes both leave at
// DispatchSend, and only receivers wait for the count exchange (to know
// what arrives and where each expert's rows go). The reference put
// overflow after the overflow of lower-numbered groups, which made
// senders wait a count round trip before posting it; its buffer held G*M
// rows more than these windows do.
//
// Only the replica of a group whose replica index equals the receiver's
// serves it: that rank stages and writes, the others skip (PathReplica).
//
// # Immediates (per receiving rank; n = NICsPerGPU)
//
//	route             G-1: one count row from each other group (peer-sharded)
//	dispatch          one eager write per group of another domain (zero rows
//	                  included, peer-sharded), plus n byte slices for each such
//	                  group whose count exceeds M
//	combine           (W-S)*n: every rank of another domain writes the results
//	                  of this rank's group, split in n byte slices
//	dispatch-barrier  W-1
//	combine-barrier   W-1
//	node-dispatch     S-1: each node peer's pushed and staged dispatch rows are ready
//	node-combine      S-1: each node peer's combine rows are pushed
//	join              W-1 per phase of a membership change (two phases)
//
// With some ranks inactive, every count covers the active ranks only: G
// becomes the live groups (those with an active replica), W and S the
// active ranks of the world and of the domain, W-S the active ranks of
// other domains. Each membership generation uses its own bank of these
// values (Layout.Imm).
//
// # Lost ranks and the active-rank mask
//
// A rank that dies or stops answering fails the others' calls with a
// *RankError naming it (as soon as the transport declares it lost) or
// with ErrTimeout (the backend's timeout): never a hang. The survivors
// then carry on without it: each calls Context.SetActiveRanks with the
// same Membership (a generation number and the active ranks), which
// revives its broken context. Mooncake EP passes an active_ranks tensor
// and FlashInfer an active_rank_mask with every dispatch and combine;
// here the mask is state of the context, changed between iterations by a
// collective call, because every rank must plan an iteration with the same
// mask (the immediate counts depend on it), and because a change must
// resynchronise the members, which a per-call argument cannot do: the
// generation given up is abandoned (transfers drained, workers stopped),
// the immediates move to the new generation's bank so stragglers are
// never counted, targets and liveness watches are rebuilt for the active
// ranks, and the members meet twice, quiet and then reset, before the
// first iteration of the new generation.
//
// Semantics with a mask (package reference computes the same, in
// DispatchActive and CombineActive, so every backend is checked bit for
// bit): a copy routed to an expert of an inactive rank is dropped at
// dispatch (PathDropped: not sent; DispatchOutput.Dropped and
// DroppedExperts report it to the rank whose token it was) and combine
// leaves its slot out of the sum, as if its weight were zero. A group
// with no active replica sends nothing. A group's active replicas serve
// the ranks its inactive replicas served (Members). Nothing waits for an
// inactive rank: no route, eager write, barrier, node signal or counter.
// A rank comes back only through another SetActiveRanks, with a descriptor
// exchange when it restarted (see SetActiveRanks for the rules).
//
// # Fixes relative to the reference (pplx-garden p2p-all-to-all)
//
//   - Replicated groups across domains: only the replica with the
//     receiver's replica index posts the eager write, so the dispatch
//     counter gets exactly one immediate per remote group; the reference
//     let every replica post it, leaving D-1 surplus immediates per group
//     that could raise the next iteration's flag before its data landed.
//   - Transmit accounting: backends wait for the completion of every
//     transfer they posted (the count exchange included) before a buffer
//     is reused; the reference left the count-exchange write out of the
//     number it waited for, so its counter drifted by one per iteration.
//   - Zero tokens: an empty plan is still a complete plan (zero-row eager
//     writes are posted, all counts and barriers run); the reference's
//     one-block-per-token path never raised its completion flag when the
//     token count was 0 and the worker hung.
//   - Fences: the design rule for backends is that every publication to
//     another agent (CPU worker, NIC, node peer) is a release after the
//     data it covers (a system-scope fence on GPUs, a mutex or atomic on the
//     host); the reference raised its MMIO flags with no system fence.
//   - Scales: any count 0..H, copied in their own loop into their own
//     16-byte-aligned slot; the reference required Hs*16 <= token bytes.
//   - Token rows: only H*size bytes are read from and written to caller
//     memory, so any H works; the reference copied round16(H*size) bytes
//     and over-read/over-wrote when that was not H*size.
//   - Sizes: the send and receive buffers hold T*K rows even when
//     G*min(K,L) < K (combine results land at the expert-sorted positions),
//     and the output bound adds L*(pad-1) padding rows to the copy bound
//     instead of taking a minimum that can be too small. The reference's
//     sizing silently assumed distinct experts per token; PlanSend checks it.
//   - Node pushes: only the replica serving a receiver pushes to it (the
//     reference's one-block-per-token path let every replica store the
//     same rows).
//   - Arguments: combine takes no indices (the planner keeps the
//     dispatch's routing) and dispatch no weights; the reference took both
//     and ignored one of them.
//   - Deterministic order: ordinals are token-major instead of assigned by
//     atomics, so outputs can be compared row for row with the oracle.
//   - Planner cost: count rows carry their segment starts and the receive
//     plan is a list of runs (consecutive copies that travel together), so
//     PlanRecv costs O(G*L + runs) rather than O(G*E + copies).
//   - Limits: no E <= 512 or W <= 512 limit (the planner is Go); peer
//     tables always include the rank itself; strides are bytes for rows
//     and elements for float32 arrays, consistently.
//
// # Backends
//
// Package host is the host-memory backend: Go pack/unpack loops over
// buffers registered with a fabric.Engine, a worker goroutine for the
// count exchange and the barriers, and node peers sharing buffers
// through memfd mappings passed over unix sockets (or plain memory when
// the ranks share a process). Its wiring is what a GPU backend reuses:
//
//   - one Scatter per phase and kind (routes and eager writes sharded by
//     peers, overflow and combine writes sharded by bytes), zero-length
//     eager and combine targets included, each with the phase's tag;
//   - one Barrier per signal (node-dispatch, node-combine to the node peers;
//     dispatch- and combine-barrier to every other rank);
//   - one credit ImmCounter per tag (a FlagCounter where a kernel waits);
//   - a TransferCounter, drained at each barrier, so every posted request
//     is waited for before its buffers are reused.
//
// Package cuda (a2a/cudabackend) is the GPU backend built on that wiring
// (package a2a/internal/wire): four kernels replace the pack/unpack loops,
// node ranks' buffers are device pointers, and the caller-side waits
// become flags the kernels poll (a FlagCounter for the immediates,
// host-mapped words for the worker's hand-offs). Its kernels run on a GPU
// or, in every CI run, on the CPU emulator (a2a/cudabackend/emulated).
package a2a
