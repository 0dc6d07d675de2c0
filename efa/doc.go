// Package efa is ferry's libfabric provider: it implements fabric.RdmaDomain
// on FI_EP_RDM endpoints and registers itself with fabric as "libfabric".
// Import it for its side effect, as with database/sql drivers:
//
//	import _ "github.com/ferryrdma/ferry/efa"
//
// It serves the "efa" transport and a fixed list of other libfabric
// provider names (fabric.Transports lists them): "tcp;ofi_rxm" and "shm" run
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
// Poll each make exactly one call into C per batch: the fabric.WriteOp
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
// A peer that can never be reached must not hold its ops forever:
// tcp;ofi_rxm answers -FI_EAGAIN for as long as it cannot connect, so when
// the op at the front of a post has been refused for
// DomainOptions.HandshakeTimeout (10 s by default), the post returns a
// *fabric.ProviderError for it that also wraps fabric.ErrTimeout, and later
// refused ops to that peer fail at once until one of them is accepted.
//
// # Errors
//
// Bad input wraps fabric.ErrInvalidArgument, unknown registrations
// fabric.ErrUnknownRegion, missing providers or features
// fabric.ErrNotSupported, calls on a closed Domain fabric.ErrClosed, and
// failed libfabric calls are *fabric.ProviderError (fabric.ErrProvider).
// Built with CGO_ENABLED=0, every entry point returns an error wrapping
// fabric.ErrNotSupported.
//
// RawBench is the provider's ceiling for fabric-debug --raw: writes posted
// straight from a C loop, with no engine in between.
package efa
