// Package efa is ferry's libfabric provider: it implements rdma.Domain
// on FI_EP_RDM endpoints and registers itself with fabric as "libfabric".
// Import it for its side effect, as with database/sql drivers:
//
//	import _ "github.com/ferryrdma/ferry/efa"
//
// It serves the "efa" transport and a fixed list of other libfabric
// provider names (rdma.Transports lists them): "tcp;ofi_rxm" and "shm" run
// the same code path on machines without an RDMA NIC, which is how it is
// tested. libfabric's own verbs provider is "verbs;ofi_rxm"; "verbs" is
// ferry's verbs package.
//
// # Policy
//
// Discovery asks fi_getinfo for FI_MSG|FI_RMA (plus FI_HMEM on efa, and
// FI_LOCAL_COMM|FI_REMOTE_COMM except on shm, which refuses them), offers
// every mr_mode bit ferry can honour and acts on what the provider keeps:
// virtual or offset remote addressing (FI_MR_VIRT_ADDR), provider or
// requested keys (FI_MR_PROV_KEY), local descriptors in every op, and
// binding registrations to the endpoint (FI_MR_ENDPOINT). On efa the
// endpoint forbids the shared-memory and CUDA-copy shortcuts where this
// libfabric has those options, so every byte goes through the NIC.
//
// # Data path
//
// A Domain belongs to one goroutine. PostWrites, PostSends, PostRecvs and
// Poll each make exactly one call into C per batch: the rdma.WriteOp
// slice is passed as it is (its layout matches a C struct) and C loops over
// fi_writemsg until the provider is busy. Poll reads the completion queue
// 16 entries at a time, classifies each entry by its flags and keeps the
// text of error entries for DescribeError. Op contexts are the engine's
// integers, returned unchanged.
//
// tcp and shm progress data only while the target polls its completion
// queue: the engine must keep polling every domain, including ones that only
// receive.
//
// Plain RMA on 1.17's shm is the exception: a write without an immediate
// and every read (a read carries none) take shm's fast path, in which the
// initiator copies the bytes itself with process_vm_writev or
// process_vm_readv inside fi_writemsg or fi_readmsg, and the target only
// counts the op when it next polls. A read therefore waits for nothing at
// the target and costs what such a write costs (16 MiB pieces take the
// same 2.5-3.5 ms at best either way here). The copy runs under the
// target region's spin lock, so a target that polls meanwhile spins in
// fi_cq_read until the piece is copied: measured in a loopback, that
// spinning took as much CPU as the copy itself.
//
// A peer that can never be reached must not hold its ops forever:
// tcp;ofi_rxm answers -FI_EAGAIN for as long as it cannot connect, so when
// the op at the front of a post has been refused for
// DomainOptions.HandshakeTimeout (10 s by default), the post returns a
// *rdma.ProviderError for it that also wraps rdma.ErrTimeout, and later
// refused ops to that peer fail at once until one of them is accepted.
//
// # Stale peers
//
// Addresses carry the opening engine's incarnation. A tcp endpoint
// answers incarnation questions on a UDP socket bound to its own address
// and port number (DomainOptions.Port pins both, for processes that
// restart on their old address); ResolvePeer asks once and CheckPeer asks
// again without waiting, so a peer whose process is gone, or whose address
// a later engine took, is refused with rdma.StaleError and the data path
// pays nothing. shm endpoint names hold the pid and a per-process nonce:
// a ferry name whose process is gone is stale at ResolvePeer and CheckPeer.
// The efa transport does not check (its addresses change with every
// endpoint).
//
// # libfabric generations
//
// ferry builds and runs against libfabric 1.17 (Debian 12's) and 2.x (2.1
// is tested: Debian 13's, which make deps builds into .deps/, and the line
// current EFA installers ship). A binary built against 1.17 also runs on
// 2.x, which keeps the 1.x symbols. It asks fi_getinfo for the oldest of
// the API version of its headers, that of the library loaded and 2.1, the
// newest it was checked against (APIVersion; fabric-debug info and the
// ferry_library_info metric print both versions). Whatever differs
// between the generations is decided in one place, internal/ofi's
// generation rules, from the library loaded:
//
//   - libfabric 2.x's shm reports the target side of a write carrying an
//     immediate with FI_REMOTE_CQ_DATA alone (1.17: with FI_RMA and
//     FI_REMOTE_WRITE too), whatever API version or FI_RMA_EVENT is asked
//     for: from 2.0 on such an entry is an immediate.
//   - The hints carry no mode bits: 2.x's efa provider also offers an
//     "efa-direct" fabric that requires FI_CONTEXT2, which ferry's integer
//     op contexts cannot honour, so fi_getinfo returns only the RDM "efa"
//     fabric, as on 1.x.
//
// The 1.17 hazards, re-checked on 2.1:
//
//   - tcp;ofi_rxm can crash inside fi_close of an endpoint that writes
//     are still streaming into, or that has writes in flight on a
//     connection that stopped moving: 2.1 still does (a NULL dereference
//     in rxm_handle_comp_error under rxm_ep_close; with Abandon closing
//     them, the fault suite's "link down for good" crashed the target in
//     3 runs of 3 on 2.1). Abandon keeps tcp endpoints open on every
//     version.
//   - 1.17's shm takes the peer's region lock in every post, so a peer
//     killed while holding it leaves the poster spinning in libfabric
//     (the engine's watchdog then gives the worker up, ErrAbandoned). 2.1
//     posts through a lock-free command queue and takes that lock only in
//     its SAR protocol (large writes without cross-memory attach); the
//     watchdog and the shm liveness checks stay on every version, as
//     shm reports a dead peer no better on 2.1. Each post batch also
//     skips libfabric for ops to a peer whose process has exited (a
//     pidfd per peer, deathwatch.go), which narrows the window in which
//     a post can reach a dead peer to the moments before its exit is
//     seen.
//   - Closing one of two shm endpoints of one process right after traffic
//     can crash the other's next fi_cq_read: 2.1 still does (1 run in 5,
//     1.17 2 in 5), so the conformance suite's close-under-traffic case
//     still runs shm across processes only (tests/).
//   - One 4 GiB + 1 B write over shm between untouched regions: on 1.17
//     one provider call runs past the watchdog's 10 s and the worker is
//     given up (ErrAbandoned); 2.1 completes it (about 22 s here, under
//     load) with no call that long. No libfabric workaround is involved:
//     the watchdog is the engine's, for every provider.
//
// # Unregistered regions
//
// What a writer learns when its target unregisters the region it writes
// into (efa/testdata/shm_unregistered.c shows it, on 1.17 and 2.1 alike):
//
//   - shm, once it has cross-memory attach to the peer (its usual state
//     shortly after the first contact), copies a plain write itself with
//     process_vm_writev, checking no key: the write succeeds and lands in
//     the memory that was unregistered, for as long as the target keeps it
//     mapped. When the target has unmapped it, the copy fails and shm
//     queues an error completion with no context (EIO) and none for the
//     write itself, which therefore ends at its deadline (ErrTimeout).
//   - shm's other path (before that, and for writes with an immediate or
//     FI_DELIVERY_COMPLETE) hands the write to the target, which finds no
//     region with the key ("unknown key" in its log) and drops it with no
//     answer: the write never completes, and the writes posted after it on
//     that endpoint (to any region, of any peer) wait behind its response
//     slot; they too end at their deadlines.
//   - tcp;ofi_rxm's target tears the connection down (see the liveness
//     notes); tcp completes a write once it is sent, so a write into the
//     unregistered region after a reconnect can complete successfully at
//     the writer while the target drops it and the connection again.
//
// No completion names the region, so the engine cannot fail later writes
// to it at once on these providers (ipc can: its target answers ENOKEY).
// A region must not be unregistered while peers may still write into it;
// the deadline of each transfer bounds the writer's wait.
//
// # Write completion
//
// tcp;ofi_rxm completes a write once it was sent, and efa once its
// packets left: neither means the bytes are in the target's memory. Writes
// that must be visible when they complete ask FI_DELIVERY_COMPLETE per op:
// heartbeats (rdma.WriteDelivered) and the writes of a request that
// carries a notification (rdma.WriteVisible; the engine sends the
// notification once they completed). shm's completion already means the
// copy into the target is done, so there WriteVisible asks nothing:
// libfabric 1.17's shm never completed delivery-complete writes posted on
// several endpoints of one process at once (a 2-NIC group). The choice is
// made per endpoint when it opens (ofi.Endpoint.VisibleNeedsDelivery) and
// costs the post loop nothing. On efa (read in libfabric 2.1's source; no
// EFA device here to measure): writes the device carries out as RDMA
// writes are posted the same with or without FI_DELIVERY_COMPLETE, their
// completion coming on the responder's acknowledgement; writes emulated
// over sends use efa's delivery-complete packets, which a peer whose
// libfabric lacks them refuses (FI_EOPNOTSUPP: the request fails, with the
// provider's error).
//
// # Errors
//
// Bad input wraps rdma.ErrInvalidArgument, unknown registrations
// rdma.ErrUnknownRegion, missing providers or features
// rdma.ErrNotSupported, calls on a closed Domain rdma.ErrClosed, and
// failed libfabric calls are *rdma.ProviderError (rdma.ErrProvider).
// Built with CGO_ENABLED=0, every entry point returns an error wrapping
// rdma.ErrNotSupported.
//
// RawBench is the provider's ceiling for fabric-debug --raw: writes posted
// straight from a C loop, with no engine in between.
package efa
