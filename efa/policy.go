//go:build cgo

package efa

import (
	"github.com/ferryrdma/ferry/internal/ofi"
)

// policy is what ferry asks libfabric for on one transport. It is plain
// data, derived from the transport name alone, so it can be printed and
// tested without touching the library.
type policy struct {
	transport string // the provider name given to fi_getinfo
	caps      uint64
	mrMode    uint64 // offered; the provider answers with a subset
	efa       bool   // EFA-only endpoint options and FI_HMEM
	useNode   bool   // whether DomainOptions.Node pins the source address
}

// fullMRMode is every mr_mode bit ferry knows how to honour. Offering all
// of them lets each provider keep what it needs: EFA keeps them all, shm
// keeps FI_MR_VIRT_ADDR, tcp;ofi_rxm keeps none.
const fullMRMode = ofi.MRLocal | ofi.MRVirtAddr | ofi.MRAllocated | ofi.MRProvKey

func policyFor(transport string) policy {
	p := policy{
		transport: transport,
		caps:      ofi.CapMsg | ofi.CapRMA,
		mrMode:    fullMRMode,
		useNode:   true,
	}
	switch transport {
	case "efa":
		// FI_HMEM only here: asking other providers for it makes
		// fi_getinfo return nothing on libfabric builds without CUDA.
		p.caps |= ofi.CapHMEM | ofi.CapLocalComm | ofi.CapRemoteComm
		p.mrMode |= ofi.MRHMEM
		p.efa = true
	case "shm":
		// shm refuses FI_LOCAL_COMM/FI_REMOTE_COMM (FI_ENODATA on 1.17),
		// and its addresses are names, not IP addresses.
		p.useNode = false
	default:
		p.caps |= ofi.CapLocalComm | ofi.CapRemoteComm
	}
	return p
}

// node returns the fi_getinfo node and flags for opts.Node.
func (p policy) node(node string) (string, uint64) {
	if !p.useNode || node == "" {
		return "", 0
	}
	return node, ofi.FlagSource
}
