package rdma

import "github.com/ferryrdma/ferry/internal/hostfiles"

// HostFile is a duplicate descriptor of the memory file behind a range of
// host memory the engine allocated. The receiver owns FD and closes it.
type HostFile = hostfiles.File

// HostMemoryFile returns the memory file behind [addr, addr+n) when the
// range lies inside one live memfd-backed host buffer of this process
// (fabric.AllocHost, fabric.MapHostFile), with a fresh close-on-exec
// descriptor the caller must close: how a same-host provider shares
// registered memory with a peer process. Any other memory (anonymous, C,
// GPU) gives an error wrapping ErrNotSupported.
//
// Whoever gets the descriptor can map the whole buffer, not only the
// range: hand it only to peers trusted with all of it.
func HostMemoryFile(addr uintptr, n uint64) (HostFile, error) { return hostfiles.Lookup(addr, n) }
