package ofi

/*
#cgo pkg-config: libfabric
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"strconv"
	"syscall"
	"unsafe"
)

// Capability, mode and flag bits the efa package passes through.
const (
	CapMsg        = uint64(C.FI_MSG)
	CapRMA        = uint64(C.FI_RMA)
	CapHMEM       = uint64(C.FI_HMEM)
	CapLocalComm  = uint64(C.FI_LOCAL_COMM)
	CapRemoteComm = uint64(C.FI_REMOTE_COMM)

	MRLocal     = uint64(C.FI_MR_LOCAL)
	MRVirtAddr  = uint64(C.FI_MR_VIRT_ADDR)
	MRAllocated = uint64(C.FI_MR_ALLOCATED)
	MRProvKey   = uint64(C.FI_MR_PROV_KEY)
	MREndpoint  = uint64(C.FI_MR_ENDPOINT)
	MRHMEM      = uint64(C.FI_MR_HMEM)

	AccessSend        = uint64(C.FI_SEND)
	AccessRecv        = uint64(C.FI_RECV)
	AccessRead        = uint64(C.FI_READ)
	AccessWrite       = uint64(C.FI_WRITE)
	AccessRemoteRead  = uint64(C.FI_REMOTE_READ)
	AccessRemoteWrite = uint64(C.FI_REMOTE_WRITE)

	FlagSource = uint64(C.FI_SOURCE)

	AddrFormatStr = uint32(C.FI_ADDR_STR)
)

// Event kinds written by Poll; they equal rdma.EventKind values.
const (
	EventWrite = uint32(C.FERRY_EV_WRITE)
	EventSend  = uint32(C.FERRY_EV_SEND)
	EventRecv  = uint32(C.FERRY_EV_RECV)
	EventImm   = uint32(C.FERRY_EV_IMM)
)

// WriteHasImm is the op flag that sends WriteOp.Imm as remote CQ data.
const WriteHasImm = uint32(C.FERRY_WRITE_HAS_IMM)

// WriteRead is the op flag that posts the op with fi_readmsg instead.
const WriteRead = uint32(C.FERRY_WRITE_READ)

// WriteDelivered is the op flag that asks FI_DELIVERY_COMPLETE.
const WriteDelivered = uint32(C.FERRY_WRITE_DELIVERED)

// WriteVisible is the op flag that asks FI_DELIVERY_COMPLETE on endpoints
// told VisibleNeedsDelivery.
const WriteVisible = uint32(C.FERRY_WRITE_VISIBLE)

// Errno is a positive libfabric error number (FI_E*).
type Errno int

// Error numbers callers test for.
const (
	EAGAIN      = Errno(C.FI_EAGAIN)
	ENODATA     = Errno(C.FI_ENODATA)
	ENOSYS      = Errno(C.FI_ENOSYS)
	ETIMEDOUT   = Errno(C.FI_ETIMEDOUT)
	ETRUNC      = Errno(C.FI_ETRUNC)
	ENOKEY      = Errno(C.FI_ENOKEY)
	ENOPROTOOPT = Errno(C.FI_ENOPROTOOPT)
	EINVAL      = Errno(C.FI_EINVAL)

	ECONNRESET   = Errno(C.FI_ECONNRESET)
	ECONNREFUSED = Errno(C.FI_ECONNREFUSED)
	ECONNABORTED = Errno(C.FI_ECONNABORTED)
	ENOTCONN     = Errno(C.FI_ENOTCONN)
	EPIPE        = Errno(syscall.EPIPE) // libfabric defines no FI_EPIPE; providers pass errno through
	EHOSTUNREACH = Errno(C.FI_EHOSTUNREACH)
	ENETUNREACH  = Errno(C.FI_ENETUNREACH)
	ESHUTDOWN    = Errno(C.FI_ESHUTDOWN)
)

// Error returns fi_strerror's text.
func (e Errno) Error() string {
	s := C.fi_strerror(C.int(e))
	if s == nil {
		return "fi errno " + strconv.Itoa(int(e))
	}
	return C.GoString(s)
}

// fromRet turns a libfabric return value into an error: nil for 0 or
// positive, Errno for negative.
func fromRet(ret C.int) error {
	if ret >= 0 {
		return nil
	}
	return Errno(-ret)
}

// Version is the runtime library's version as "major.minor".
func Version() string {
	v := C.fi_version()
	return strconv.Itoa(int(v>>16)) + "." + strconv.Itoa(int(v&0xffff))
}

// APIVersion is the API version ferry asks fi_getinfo for, as "major.minor".
func APIVersion() string {
	v := C.ferry_api_version()
	return strconv.Itoa(int(v>>16)) + "." + strconv.Itoa(int(v&0xffff))
}

// InfoList owns an fi_getinfo result. Free releases it; Infos borrowed from
// it are invalid afterwards.
type InfoList struct{ head *C.struct_fi_info }

// GetInfo calls fi_getinfo for FI_EP_RDM endpoints with FI_THREAD_DOMAIN
// and no mode bits. prov and node may be empty; flags apply only with a node.
func GetInfo(prov, node string, caps, mrMode, flags uint64) (*InfoList, error) {
	return GetInfoService(prov, node, "", caps, mrMode, flags)
}

// GetInfoService is GetInfo with a service (a port number) that, with
// FlagSource, pins the source address's port too.
func GetInfoService(prov, node, service string, caps, mrMode, flags uint64) (*InfoList, error) {
	var cprov, cnode *C.char
	if prov != "" {
		cprov = C.CString(prov)
		defer C.free(unsafe.Pointer(cprov))
	}
	if node != "" {
		cnode = C.CString(node)
		defer C.free(unsafe.Pointer(cnode))
	}
	var cservice *C.char
	if service != "" {
		cservice = C.CString(service)
		defer C.free(unsafe.Pointer(cservice))
	}
	var head *C.struct_fi_info
	ret := C.ferry_getinfo_service(cprov, cnode, cservice, C.uint64_t(caps), C.uint64_t(mrMode), C.uint64_t(flags), &head)
	if err := fromRet(ret); err != nil {
		return nil, err
	}
	return &InfoList{head: head}, nil
}

// Infos returns the entries in libfabric's order.
func (l *InfoList) Infos() []Info {
	var out []Info
	for p := l.head; p != nil; p = p.next {
		out = append(out, Info{p: p})
	}
	return out
}

// Free releases the list.
func (l *InfoList) Free() {
	if l.head != nil {
		C.fi_freeinfo(l.head)
		l.head = nil
	}
}

// Info is one fi_info entry, borrowed from an InfoList or an Endpoint.
type Info struct{ p *C.struct_fi_info }

// ProvName is the provider name, such as "tcp;ofi_rxm" or "shm".
func (i Info) ProvName() string { return goString(i.p.fabric_attr.prov_name) }

// FabricName is fabric_attr->name.
func (i Info) FabricName() string { return goString(i.p.fabric_attr.name) }

// DomainName is domain_attr->name.
func (i Info) DomainName() string { return goString(i.p.domain_attr.name) }

// Caps is the capability set.
func (i Info) Caps() uint64 { return uint64(i.p.caps) }

// MRMode is the negotiated domain_attr->mr_mode.
func (i Info) MRMode() uint64 { return uint64(i.p.domain_attr.mr_mode) }

// AddrFormat is the endpoint address format (FI_SOCKADDR_IN, FI_ADDR_STR...).
func (i Info) AddrFormat() uint32 { return uint32(i.p.addr_format) }

// LinkSpeed is nic->link_attr->speed in bits per second, 0 when unknown.
func (i Info) LinkSpeed() uint64 { return uint64(C.ferry_link_speed(i.p)) }

// PCIAddress is the NIC's PCI address, empty when it has none.
func (i Info) PCIAddress() string {
	var buf [32]C.char
	if C.ferry_pci_addr(i.p, &buf[0], C.size_t(len(buf))) == 0 {
		return ""
	}
	return C.GoString(&buf[0])
}

// TxSize is tx_attr->size: how many sends or writes the provider queues.
func (i Info) TxSize() int { return int(i.p.tx_attr.size) }

// RxSize is rx_attr->size.
func (i Info) RxSize() int { return int(i.p.rx_attr.size) }

// MaxMsgSize is ep_attr->max_msg_size.
func (i Info) MaxMsgSize() uint64 { return uint64(i.p.ep_attr.max_msg_size) }

// WritesOrdered reports FI_ORDER_RMA_WAW in tx_attr->msg_order: writes
// to one peer are carried out in the order they were posted.
func (i Info) WritesOrdered() bool {
	return uint64(i.p.tx_attr.msg_order)&uint64(C.FI_ORDER_RMA_WAW) != 0
}

// CQDataSize is domain_attr->cq_data_size: bytes of remote CQ data.
func (i Info) CQDataSize() int { return int(i.p.domain_attr.cq_data_size) }

// Dump is fi_tostr of the entry, for diagnostics.
func (i Info) Dump() string { return goString(C.fi_tostr(unsafe.Pointer(i.p), C.FI_TYPE_INFO)) }

func goString(s *C.char) string {
	if s == nil {
		return ""
	}
	return C.GoString(s)
}

// Layout reports sizes and offsets of the C structs shared with Go, in the
// order of ferry_layout in raw.c: write op (size, 9 offsets), send op
// (size, 5), recv op (size, 4), event (size, 6).
func Layout() []uint64 {
	out := make([]uint64, 28)
	C.ferry_layout((*C.uint64_t)(unsafe.Pointer(&out[0])), C.int(len(out)))
	return out
}
