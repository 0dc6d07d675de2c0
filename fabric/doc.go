// Package fabric is ferry's TransferEngine: one-sided RDMA writes carrying a
// 32-bit immediate, with completion known by counting immediates at the
// receiver, never by transport ordering. The same design is correct on AWS
// EFA (SRD: reliable, unordered) and on ConnectX (RC).
//
// # Model
//
// An Engine is built from groups. A group is a Device (the host, or one CUDA
// device) with 1 to 4 NIC domains, owned by one worker goroutine locked to
// an OS thread (optionally pinned to a CPU before its NICs are opened). The
// worker is the only code that touches its domains: submits are queued to
// it, and it posts them in batches (one cgo crossing per batch), polls its
// completion queues, counts incoming immediates and hands completions to a
// dispatcher goroutine that runs user callbacks, so user code never blocks
// the poller.
//
// Providers implement the contract of package fabric/rdma (rdma.Domain: one
// NIC endpoint) and register themselves there with rdma.Register, the
// way database/sql drivers do: import github.com/ferryrdma/ferry/efa for
// libfabric (efa, tcp;ofi_rxm, shm, ...), github.com/ferryrdma/ferry/verbs
// for libibverbs and github.com/ferryrdma/ferry/ipc for shared memory
// between processes of one host (or github.com/ferryrdma/ferry/providers
// for all of them). The transport is always chosen explicitly or by "auto"
// (EFA, then verbs, else an error): there is no silent TCP fallback.
//
// # Requests and the immediate-count contract
//
// Imm, Barrier, Single (sharded over n NICs or pinned to one), Paged and
// Scatter writes each deliver a fixed number of immediates to the receiver
// (one per shard, page, target slice or barrier destination; see the
// Submit methods), so a receiver knows its data arrived by counting them
// with an ImmCounter or an expected-count callback. ExpectedImms gives that
// count for a request's Shape and the two ends' NIC counts.
//
// A request's immediate is an Imm: Immediate(v) carries v, the zero value
// none.
//
// # Leases and notifications
//
// Values from LeaseBase up belong to leases (Engine.LeaseImms): a run of
// values held for one request and retired with Lease.Retire, after which
// the immediates that arrive for them are dropped and counted
// (Stats.ImmsDropped), never credited to a later lease, whose values differ
// even when it reuses the same slots. A lease's mailbox (Lease.Mailbox)
// takes notifications of up to MaxNotifyPayload bytes that a writer
// attaches to a SingleWrite or PagedWrite (Notify), to a ScatterWrite (one
// per target peer, Notify) or sends on its own (SubmitNotification); the
// target's Lease.WaitNotification returns each once every write of its
// request is visible there, over every transport and NIC (the request's
// writes complete only once delivered), in the order they were sent. A
// mailbox queues up to MailboxDepth notifications not yet taken; a sender
// that far ahead waits (up to the request's deadline, then ErrTimeout),
// and a notification lost anyway (a second engine sending to the same
// mailbox) is reported in its place (ErrNotificationsLost), never dropped
// silently. Notification says what this rests on.
//
// # Unequal NIC groups
//
// A writer's group and the target's descriptor may have different NIC
// counts (1, 2 or 4 each). Writes are posted on the writer's NICs and
// striped over the target's: a wider writer folds its NICs onto the
// target's (NIC d to NIC d mod m), a wider target gets its shards, page
// blocks and scatter slices spread over all of its NICs. Sharded(0) takes
// one shard per NIC of the wider side, which is why the immediate count of
// a single write depends on both counts.
//
// # Reads
//
// SubmitRead and SubmitPagedRead pull bytes from a peer's region,
// registered there with AccessRemoteRead, into a local one (RDMA READ);
// SubmitScatterRead gathers ranges of several peers' regions into one
// local region, routed as a scatter write is.
// They deliver no immediate: the initiator's completion says the bytes
// are in its region. Deadlines, back-pressure, splitting and lost peers
// work as for writes; a region without the read bit fails the read with
// ErrNotReadable where the provider checks access at the target.
//
// # Registration
//
// Register pins memory with every NIC of a group. Where the provider
// allows (rdma.Registrar: verbs, ipc, mem) it runs beside the group's
// worker, the NICs at once, so transfers keep moving while a large region
// registers; libfabric domains serialize their calls, so there the worker
// waits while its NICs register in parallel (RegistrationStats().Modes).
// Registrations are range-cached per group: a span inside a live
// registration with the same remote access (or a local-only span inside
// any) gets a handle sharing it, and the memory is released with the last
// handle (or at Close). AllocHost backs large buffers with huge pages
// where the system has them (HostBuffer.PageSize).
//
// # Deadlines and lost peers
//
// Every transfer has a deadline: its Completion's (WithDeadline,
// WithContext) or Config.RequestTimeout after it was accepted. A transfer
// still running then fails with an error wrapping ErrTimeout; what the
// worker had not posted is dropped, and what the provider holds is fenced:
// late completions are absorbed, and the source memory stays registered
// until they are back.
//
// A peer is declared lost on evidence: a completion or refused post the
// provider blames on the peer (a reset or refused connection, a peer that
// refused every post for the handshake timeout), or the provider's own
// check (shm: the peer's process has exited), run every
// Config.LivenessInterval for peers with recent traffic, and at once when
// a completion names no operation. Work to a lost peer fails fast with a
// *PeerError (ErrPeerLost) naming it; one op per interval is let through,
// so a peer that comes back (a restarted process on the same address) is
// used again. A peer the provider's check finds gone (asked at once when
// an op fails for the peer's fault) is lost for good: nothing is let
// through to it again, and every other peer the worker has is checked
// right then, so the other NIC addresses of a process that died are
// declared lost with the first, before any failure is reported. A
// transfer that failed because its peer was lost is reported after the
// peer was declared: PeerStatus then names it. The rest of the engine
// keeps serving. A receiver that only
// waits for a peer's immediates learns of its death with ImmCounter.Watch
// (or WatchPeer, PeerStatus and OnPeerLost), which also sends heartbeats on
// providers that have them. Connect warms peers up before the first
// transfer: it resolves their addresses on every NIC and completes the
// provider's connection setup, failing with a *PeerError for a peer that
// is not there.
//
// Stale descriptors are refused. Every engine draws a random incarnation
// when it opens, and its addresses, so its descriptors, carry it. A write
// or send through a descriptor whose engine is gone (closed, or its
// process ended) or was replaced (a restarted process that took the same
// address, as on tcp with Config.ListenPort) fails with an error wrapping
// ErrStaleDescriptor and ErrPeerLost, when the peer is first contacted or
// on the first completion after it went: mem, ipc and shm endpoint names
// are never reused, so the check is their connect or their liveness
// check; tcp;ofi_rxm endpoints answer an incarnation question on a UDP
// socket of their own address and port, asked at first contact and at
// each liveness check (never per operation). On tcp a writer that was
// connected to the old process when it restarted is refused only at its
// next liveness check (within Config.LivenessInterval): rxm reconnects to
// the new process silently, and writes in that window complete (tests saw
// about 40 in 220 ms), with the old keys, in the new process. Descriptors
// and addresses encoded before incarnations existed are refused with
// ErrBadEncoding.
//
// Descriptors of a live engine are otherwise trusted: a forged one (a
// wrong key, a length larger than the region) passes the engine's bounds
// checks, and on tcp and shm the write can complete successfully while
// nothing lands at the target and no immediate arrives; the receiver's
// wait then ends only by its timeout. The same holds for a descriptor of
// a region that was unregistered while its engine lives on. The engine
// checks what it can see: the descriptor's form, address modes, ranges
// against the descriptor, and descriptors of this engine's own regions
// against its registry.
//
// # Concurrency and lifetime
//
// Engine methods are safe for concurrent use. Queues are bounded: a worker
// holds at most Config.MaxPending unfinished transfers, and a submitter
// that finds its queue full waits until its request's deadline or context
// (ErrQueueFull). Close stops the workers, fails every pending operation
// with ErrClosed, wakes every wait, unregisters memory and closes the
// domains, by its context's deadline even when a worker is stuck in a
// provider call (it then says what it abandoned: ErrAbandoned). A worker
// that stays inside one provider call for Config.StuckTimeout without the
// provider showing progress (ProgressReporter), or for a second while one
// of its peers is gone, is given up on without waiting for Close: its
// transfers fail with ErrAbandoned and the rest of the engine goes on.
// Writes of any length are posted in pieces of at most the provider's
// largest write (DomainInfo.MaxWrite), capped at 16 MiB, one piece per
// provider call, so a long transfer is a series of short calls. Memory
// handed to a NIC is never Go heap memory: use AllocHost, C memory or GPU
// memory.
//
// # Logs and metrics
//
// The engine logs through Config.Logger's handler (slog.Default's when
// nil), warnings and errors only unless Config.LogLevel asks for more:
// slog.LevelInfo adds the open and close lines, slog.LevelDebug the
// workers' start and stop. Stats returns the counters and
// TransferHistograms the latency and size distributions of the transfers
// that succeeded, per kind (each worker counts its own in fixed buckets,
// added up when read); package fabric/fabricmetrics exports both to
// Prometheus.
package fabric
