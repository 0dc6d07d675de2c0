package rdma

import "fmt"

// AddrMode says how a provider forms the remote address of an RDMA write
// into a registered region.
type AddrMode uint8

const (
	// AddrVirtual: the remote address is the region's virtual base plus the
	// offset (FI_MR_VIRT_ADDR, verbs).
	AddrVirtual AddrMode = 1
	// AddrOffset: the remote address is the offset from the region's start
	// (libfabric without FI_MR_VIRT_ADDR, such as tcp;ofi_rxm).
	AddrOffset AddrMode = 2
)

func (m AddrMode) String() string {
	switch m {
	case AddrVirtual:
		return "va"
	case AddrOffset:
		return "offset"
	}
	return fmt.Sprintf("addrmode(%d)", uint8(m))
}
