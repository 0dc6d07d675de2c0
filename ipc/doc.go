// Package ipc is ferry's intra-node transport: an rdma.Domain over shared
// memory between processes (or engines) of one machine, registered as
// transport "ipc".
//
//	import _ "github.com/ferryrdma/ferry/ipc"
//	eng, err := fabric.Open(ctx, fabric.Config{Transport: "ipc"})
//
// # How a write moves
//
// Remote-writable memory is a memfd (fabric.AllocHost hands them out). An
// initiator that first writes into a region asks the target for its file
// over a unix socket (SCM_RIGHTS), maps it, and from then on a write is
// the initiator's worker copying into its own mapping of the target's
// pages, large copies split across helper goroutines where cores are
// idle. The immediate follows through a single-producer ring in a shared
// page of the connection, published with an atomic store after the
// copy, so the target sees the bytes before the count. No thread of the
// target moves bytes: its worker only drains immediates and messages.
// Two-sided sends go through a second ring on the same page. A target's
// worker with nothing to do may sleep: the first initiator that publishes
// into its rings wakes it through an eventfd (see rdma.Sleeper).
// The initiator lends its mapping of a target's region to callers that
// store into it themselves and post a zero-byte write for the immediate
// (rdma.PeerMapper, fabric.Engine.MapPeer; the host all-to-all does):
// they hold it as the worker's copies do, so a revocation waits for them.
//
// # Names, trust and leaks
//
// Endpoints listen in the abstract unix namespace, so nothing is left in
// the file system when a process dies, and memfds vanish with their last
// mapping. Addresses carry a random nonce and the host's boot id; keys
// are random. A peer must run as the same user (or root) and know a
// region's descriptor to map it, and the file it then holds spans the
// whole fabric.AllocHost buffer the region lies in: share buffers only
// with peers trusted with all of them. Processes in different network
// namespaces cannot reach each other's endpoints.
//
// # Failures
//
// When a peer process exits or crashes, the kernel closes its end of the
// control connection and the other side learns as soon as the
// connection's reader goroutine runs: the initiator unmaps the target's
// regions and connection page, fails every write it held for it and every
// later one with an error wrapping rdma.ErrPeerLost (and
// rdma.ErrProvider); the target delivers what the dead initiator had
// published, then unmaps the connection page. That reader also finds the
// process exiting (/proc) and marks every other connection of this
// process to it dead first, so the endpoints of one dead process (the
// NICs of its engine) are found gone together, and CheckPeer reports
// them: an engine declares them lost for good. Until a reader has run, a
// write to a process that just died may still complete successfully, its
// bytes landing in pages nobody reads, as an RDMA write the NIC
// acknowledged just before its target died. Unregistering a region
// revokes every peer's mapping and waits until each acknowledged, so no
// write lands after UnregisterMemory returns. Writes with an unknown or
// revoked key, or a range outside the region, fail with a remote access
// error; zero-byte writes carry their immediate without checking the key,
// as RDMA zero-length writes do.
package ipc
