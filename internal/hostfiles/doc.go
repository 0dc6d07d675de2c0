// Package hostfiles indexes the live memfd-backed host mappings of this
// process by address, so that a same-host provider (ipc) can find the file
// behind any span it is asked to register and pass it to a peer process.
// The engine adds a mapping when it allocates one and removes it before it
// unmaps it; providers read it through the contract package
// (rdma.HostMemoryFile). It is touched at allocation, free and
// registration, never per operation.
package hostfiles
