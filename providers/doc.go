// Package providers links every transport provider ferry ships, so that a
// program names transports the same way whatever its entry point:
//
//	import _ "github.com/ferryrdma/ferry/providers"
//
// After that import, each transport name maps to exactly one provider:
//
//	efa, tcp;ofi_rxm, tcp, shm, ...   package efa (libfabric)
//	verbs                             package verbs (libibverbs)
//	ipc                               package ipc (shared memory between processes of one host)
//	mem, null                         in-process (as fabric/fabrictest registers them)
//
// fabric-debug, bench-a2a and the C library libferry import this package;
// rdma.Transports lists the mapping at run time. A program that wants
// fewer providers (and fewer shared-library dependencies) imports the
// provider packages it needs instead.
package providers
