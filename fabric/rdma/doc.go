// Package rdma is the provider contract of ferry's transfer engine: what a
// NIC provider implements and what the engine (package fabric) and the
// providers (efa, verbs, ipc, memfabric) share, the way database/sql/driver
// serves database drivers. Providers import this package, never the
// engine; programs import the engine and the providers they want.
//
// A provider registers a Provider from an init function (Register). The
// engine looks transports up (Lookup) and opens one Domain per NIC: a
// single-threaded endpoint owned by one worker, driven in batches of
// WriteOp, SendOp and RecvOp, reporting completions as Events. Submits
// never fail synchronously for a reason found after acceptance: errors
// come back as completions, described by a ProviderError. Optional
// interfaces (Sleeper, PeerChecker, PeerProber, ProgressReporter,
// Abandoner, LibraryReporter, PeerMapper, Registrar) let a provider offer
// what only it can do.
//
// The op and event structs are pointer-free and laid out to match the C
// shims (internal/ofi, internal/ibv), which read slices of them in place.
//
// The names users of the engine need (Address, Device, MemorySpan,
// DomainInfo, the error categories, ...) are re-exported by fabric as the
// same types and values, so errors.Is and type identity hold across both.
package rdma
