package job

// Every transport ferry ships: efa, tcp;ofi_rxm and shm (libfabric),
// verbs, ipc (shared memory between the processes of one host) and the
// in-process mem. A program of your own may import only the provider
// packages it needs instead.
import _ "github.com/ferryrdma/ferry/providers"
