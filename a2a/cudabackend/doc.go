// Package cudabackend is the CUDA backend of a2a: MoE dispatch and combine by
// four kernels (kernels/a2a_dispatch.cu, kernels/a2a_combine.cu, written
// only against cuda/kernels/ferry_device.h) and a CPU worker that drives
// the fabric engine, with the host backend's wiring (package
// a2a/internal/wire: one scatter per phase and kind, barriers, counters,
// a transfer counter drained at each barrier).
//
// # Two ways to run
//
// The backend runs its kernels on a Device. DriverDevice is a GPU through
// package cuda: the kernels are compiled by NVRTC for the exact device
// and launched cooperatively, buffers are device memory registered with
// the engine (fabric/gpu), the flags, the receive plan and the count
// table live in pinned host memory mapped into the device. Package
// a2a/cudabackend/emulated is the CPU emulator of the CUDA execution model
// (cuda/emu): the same kernel sources built by g++, "device
// memory" being host memory registered with the engine. The emulator is
// how every CI run proves this backend: W ranks in one process or as
// processes over libfabric's shm and tcp, node peers sharing memory,
// checked against the oracle bit for bit.
//
// Both implement one typed seam: Device.Load builds the kernel sources
// into a Program, whose Streams launch the Program's kernels, named by
// Kernel values; each implementation keeps its own kernel type
// (*cuda.Function, *emu.Kernel) in a KernelTable, so nothing is converted
// back from an interface. Both lay the launch arguments out with one ABI
// (cuda/internal/kernelargs).
//
// # Node ranks
//
// The ranks of an NVLink domain address each other's send and receive
// buffers directly (NodeMemory). LocalNode serves ranks of one process:
// plain device pointers. ProcessNode serves ranks that are processes of
// one machine: each allocates its buffers as exportable memory of its
// device (ExportingDevice: CUDA VMM with POSIX file descriptor handles on
// a GPU, memfds on the emulator), sends the descriptors to its node peers
// over unix sockets (SCM_RIGHTS), and maps theirs with access for its own
// device. A world of one domain needs no GPU memory registered with the
// fabric at all: only the count rows and signals cross it, in host memory.
//
// # Kernels
//
//	dispatch send  mark every copy in per-expert token bitmaps (grid);
//	               block 0: per-chunk prefix counts, per-expert counts,
//	               their scan into expert offsets (token-major ordinals,
//	               the layout of a2a.Planner.PlanSend, bit for bit), the
//	               count row into this rank's table, route flag raised
//	               before anything is packed; then every row bound for
//	               another domain is staged and the last block raises the
//	               send flag, and only then the node rows: staged for self
//	               and for pull, pushed into node peers' private windows;
//	               a block per token when the grid covers the tokens (the
//	               token's 16-byte chunks stay in registers between the two
//	               kinds of stores), tokens strided over blocks otherwise;
//	               publish to the node ranks' sync slots
//	dispatch recv  wait for the worker's plan and the node ranks' epochs;
//	               copy the plan's runs to device memory; copy the node
//	               share (pulled from peers' send buffers, or pushed) while
//	               RDMA lands; wait for the RDMA flag; copy the RDMA share;
//	               a warp per row, 16-byte vectors, four loads in flight,
//	               each warp holding the records of its next eight rows
//	               (one per lane, a batch ahead, broadcast by shuffles)
//	combine send   wait for the dispatch barrier; stage results bound for
//	               other domains, last block raises the flag; store node
//	               results into every replica's receive buffer at the
//	               copy's layout row (records eight rows ahead, as in
//	               dispatch recv); publish to the node ranks
//	combine recv   wait for the RDMA flag and the node epochs; a block per
//	               token gathers its K rows (16-byte chunks), fp32 sums in
//	               slot order with every product and sum rounded
//	               (fd_mul_add_f32: a2a.MulAdd bit for bit), one rounding
//	               into bf16/fp16/fp32, optionally onto the output
//
// Shapes common in practice (hidden 7168/4096/2048 with fp8 tokens and
// 56/32/8 scales or bf16 tokens, bf16 combine, top-8, node size
// 1/2/4/8) are specialised by defines passed to the compiler (Shapes,
// Defines); every other shape runs the generic build, which reads them at
// run time. Every build is listed by KernelBuilds for the compile gate.
//
// # Flags and epochs
//
// Kernels and the worker meet in a control block (ControlDevice): device
// memory the CPU writes through a GDRCopy mapping where GDRCopy is present
// (the kernels spin on local memory), host-mapped words otherwise. Each
// flag holds an epoch (the iteration, counted from 1) and only
// grows, so no one ever clears a flag, and kernels keep their own epoch
// in device memory. The engine's flag counters for the dispatch and
// combine immediates publish epochs the same way. Node ranks publish
// epochs into each other's sync slots (at the tail of each receive
// buffer) with system-scope release stores, read with acquire loads.
// Nothing in a step needs the host: the four launches of an iteration
// replay from a CUDA graph.
//
// The NIC's writes into GPU memory are not ordered before a flag the CPU
// raises on their completion on GPUs below sm_90 and on C2C platforms:
// there the engine's counters flush them (cuFlushGPUDirectRDMAWrites,
// RDMAFlusher) before raising the dispatch and combine flags. Rows peers
// and the NIC write during a launch are read with ordinary loads, or the
// non-coherent path in sm_90 builds only (ArchDefines).
//
// The worker spins on the kernels' flags by default on a GPU and backs
// off on the emulator (Options.Polling; BenchmarkWorkerWake measures the
// latency a backing-off worker adds, about 0.9 ms a wait).
//
// # Co-residency
//
// Every kernel is a cooperative launch whose blocks spin on flags: its
// grid must be resident at once, and so must those of every other context
// on the device, or a kernel may wait for one that cannot start. New
// checks the grid against the device's occupancy and refuses a backend
// whose grid does not fit beside the live ones on the same device
// (ResidentDevice; Options.Overcommit for callers that keep them apart
// themselves). The kernels' grid barriers are bounded by the launch's
// timeout all the same: a grid that never gathers ends in a KernelError
// (AwaitGrid), not a hang.
//
// Every wait in a kernel has a deadline (Options.Timeout, or shortly
// before the call's context ends if that is sooner). A wait that passes
// it ends the launch cleanly: the kernel skips the rest of its work, and
// the call returns a *KernelError wrapping a2a.ErrTimeout that names what
// was awaited (and the worker's error, if the worker failed first). The
// decision to skip is taken block-uniformly (a block barrier's or of the
// abort word), so no block splits between barriers on the way out. When
// the worker fails (the engine declared an active rank lost, say), it
// raises a control word that makes every kernel wait give up at once, and
// the KernelError wraps its error (an *a2a.RankError naming the rank).
//
// # Active ranks
//
// The kernels read the membership from a per-rank table the backend
// writes at each change (a2a.Context.SetActiveRanks): which ranks this
// one serves for its group (it stages or pushes their rows), and which
// are active. A copy for an inactive rank's experts is not staged, its
// layout row is marked dropped, and combine-receive leaves its slot out of
// the sum; node waits and publications skip inactive node ranks; combine
// results for a node group still go to every replica, since an inactive
// replica's buffers stay mapped and nothing reads them. A change stops the
// worker, waits for the stream and the transfers, and, between the two
// meetings of the members, starts every epoch again from zero (the
// kernels' iteration count, the control block, this rank's sync slots),
// so that all members count alike from the first iteration on.
//
// # Calls
//
// Backend implements a2a.Backend, so an a2a.Context drives it with the
// same call-order contract as the host backend. Each call launches its
// kernel and waits for it: on the emulator the kernels read and write the
// caller's slices in place (pinned for the call); on a GPU they are
// staged through device memory.
package cudabackend
