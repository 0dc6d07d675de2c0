package job

// The transports the examples can name. A program of your own imports only
// the providers it needs, for their side effect, as with database/sql
// drivers.
import (
	_ "github.com/ferryrdma/ferry/efa"   // libfabric: efa, tcp;ofi_rxm, shm
	_ "github.com/ferryrdma/ferry/verbs" // libibverbs: ConnectX, Soft-RoCE

	// The in-process "mem" transport, for runs with every rank in one
	// process (ferry's own tests use it the same way).
	_ "github.com/ferryrdma/ferry/fabric/memfabric"
)
