package fabricbench

// The providers a benchmark can name: libfabric (efa, tcp;ofi_rxm, shm),
// verbs, and the in-process mem and null domains.
import _ "github.com/ferryrdma/ferry/providers"
