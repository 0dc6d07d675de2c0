package efa

// ProviderName is the name this package registers with rdma.Register.
const ProviderName = "libfabric"

// transportNames are the transport names this provider serves: libfabric
// provider names, listed one by one so that no name reaches libfabric by
// accident (ferry's own "verbs" is package verbs; libfabric's verbs
// provider is reached as "verbs;ofi_rxm"). A name outside this list is an
// unknown transport, reported with the valid ones.
var transportNames = []string{
	"efa",
	"tcp;ofi_rxm", "tcp",
	"shm",
	"verbs;ofi_rxm",
	"udp;ofi_rxd", "sockets",
	"psm2", "psm3", "opx", "cxi", "ucx",
}
