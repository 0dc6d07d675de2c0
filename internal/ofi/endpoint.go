package ofi

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// openSteps names the step of ferry_open that failed, for error messages.
var openSteps = map[C.int]string{
	C.FERRY_STEP_FABRIC:  "fi_fabric",
	C.FERRY_STEP_DOMAIN:  "fi_domain",
	C.FERRY_STEP_CQ:      "fi_cq_open",
	C.FERRY_STEP_AV:      "fi_av_open",
	C.FERRY_STEP_EP:      "fi_endpoint",
	C.FERRY_STEP_BIND_CQ: "fi_ep_bind(cq)",
	C.FERRY_STEP_BIND_AV: "fi_ep_bind(av)",
	C.FERRY_STEP_SETOPT:  "fi_setopt",
	C.FERRY_STEP_ENABLE:  "fi_enable",
	C.FERRY_STEP_NOMEM:   "calloc",
}

// OpenError says which libfabric call of Open failed.
type OpenError struct {
	Step  string
	Errno Errno
}

func (e *OpenError) Error() string { return e.Step + ": " + e.Errno.Error() }
func (e *OpenError) Unwrap() error { return e.Errno }

// Endpoint is an opened fabric, domain, completion queue, address vector
// and enabled RDM endpoint, all owned by one C struct. It is not safe for
// concurrent use.
type Endpoint struct {
	e *C.struct_ferry_ep
}

// Open opens an endpoint on a copy of info. srcName, when not empty,
// replaces the source address with that FI_ADDR_STR name (shm endpoints in
// one process need distinct names). cqSize 0 takes the provider's default.
// efaOpts applies the EFA-only endpoint options where this libfabric has them.
func Open(info Info, cqSize int, efaOpts bool, srcName string) (*Endpoint, error) {
	dup := C.ferry_dupinfo(info.p)
	if dup == nil {
		return nil, &OpenError{Step: "fi_dupinfo", Errno: Errno(C.FI_ENOMEM)}
	}
	if srcName != "" {
		cs := C.CString(srcName)
		ret := C.ferry_set_src_str(dup, cs)
		C.free(unsafe.Pointer(cs))
		if ret != 0 {
			C.fi_freeinfo(dup)
			return nil, &OpenError{Step: "set source name", Errno: Errno(-ret)}
		}
	}
	var e *C.struct_ferry_ep
	var step C.int
	eo := C.int(0)
	if efaOpts {
		eo = 1
	}
	// ferry_open owns dup from here on, on success and on failure.
	if ret := C.ferry_open(dup, C.size_t(cqSize), eo, &e, &step); ret != 0 {
		return nil, &OpenError{Step: openSteps[step], Errno: Errno(-ret)}
	}
	return &Endpoint{e: e}, nil
}

// Info is the entry the endpoint was opened with, with the negotiated
// attributes. It is valid until Close.
func (ep *Endpoint) Info() Info { return Info{p: ep.e.info} }

// Close closes the endpoint, address vector, queue, domain and fabric, in
// that order, and returns the first error. Memory registrations must be
// closed first. Close is idempotent.
func (ep *Endpoint) Close() error {
	if ep.e == nil {
		return nil
	}
	ret := C.ferry_close(ep.e)
	ep.e = nil
	return fromRet(ret)
}

// Name is fi_getname: the endpoint's address.
func (ep *Endpoint) Name() ([]byte, error) {
	buf := (*C.char)(C.malloc(1024))
	defer C.free(unsafe.Pointer(buf))
	n := C.size_t(1024)
	if err := fromRet(C.ferry_getname(ep.e, unsafe.Pointer(buf), &n)); err != nil {
		return nil, err
	}
	return C.GoBytes(unsafe.Pointer(buf), C.int(n)), nil
}

// AVInsert inserts one peer address and returns its fi_addr_t.
func (ep *Endpoint) AVInsert(addr []byte) (uint64, error) {
	if len(addr) == 0 {
		return 0, EINVAL
	}
	// Copied to C memory: some providers read past the length they are
	// given (string formats) and keep nothing but the resolved entry.
	c := C.CBytes(append(addr[:len(addr):len(addr)], 0))
	defer C.free(c)
	var out C.fi_addr_t
	if err := fromRet(C.ferry_av_insert(ep.e, c, &out)); err != nil {
		return 0, err
	}
	return uint64(out), nil
}

// MR is one memory registration.
type MR struct {
	p    *C.struct_fid_mr
	Key  uint64 // fi_mr_key
	Desc uint64 // fi_mr_desc as an integer, passed back in op descriptors
}

// MRSpec is what RegMR registers.
type MRSpec struct {
	Addr, Len    uint64
	Access       uint64 // Access* bits
	RequestedKey uint64 // used when the domain has no FI_MR_PROV_KEY
	CUDA         bool   // FI_HMEM_CUDA memory on Device
	Device       int
	DmabufFD     int // -1 for none; used only where FI_MR_DMABUF exists
}

// DmabufSupported reports whether this build knows FI_MR_DMABUF.
func DmabufSupported() bool { return C.FERRY_HAVE_DMABUF != 0 }

// RegMR registers memory with fi_mr_regattr, binding and enabling it on the
// endpoint when the domain asks for FI_MR_ENDPOINT.
func (ep *Endpoint) RegMR(s MRSpec) (*MR, error) {
	var mr *C.struct_fid_mr
	var key, desc C.uint64_t
	cuda := C.int(0)
	if s.CUDA {
		cuda = 1
	}
	ret := C.ferry_mr_reg(ep.e, C.uint64_t(s.Addr), C.uint64_t(s.Len), C.uint64_t(s.Access),
		C.uint64_t(s.RequestedKey), cuda, C.int(s.Device), C.int(s.DmabufFD), &mr, &key, &desc)
	if err := fromRet(ret); err != nil {
		return nil, err
	}
	return &MR{p: mr, Key: uint64(key), Desc: uint64(desc)}, nil
}

// Close releases the registration. It is idempotent.
func (m *MR) Close() error {
	if m.p == nil {
		return nil
	}
	ret := C.ferry_mr_close(m.p)
	m.p = nil
	return fromRet(ret)
}

// PostWrites posts n write ops (struct ferry_write_op, the layout of
// rdma.WriteOp) from ops. It returns how many were accepted; a non-nil
// error is the failure of op n, and is never EAGAIN.
func (ep *Endpoint) PostWrites(ops *rdma.WriteOp, n int) (int, error) {
	k := int(C.ferry_post_writes(ep.e, (*C.struct_ferry_write_op)(unsafe.Pointer(ops)), C.int(n)))
	return k, fromRet(ep.e.last_err)
}

// VisibleNeedsDelivery makes writes flagged rdma.WriteVisible ask
// FI_DELIVERY_COMPLETE, for providers whose write completion means only
// that the write was sent. Call it before the first post.
func (ep *Endpoint) VisibleNeedsDelivery() { ep.e.delivered_mask |= C.FERRY_WRITE_VISIBLE }

// PostSends is PostWrites for struct ferry_send_op.
func (ep *Endpoint) PostSends(ops *rdma.SendOp, n int) (int, error) {
	k := int(C.ferry_post_sends(ep.e, (*C.struct_ferry_send_op)(unsafe.Pointer(ops)), C.int(n)))
	return k, fromRet(ep.e.last_err)
}

// PostRecvs is PostWrites for struct ferry_recv_op, any source.
func (ep *Endpoint) PostRecvs(ops *rdma.RecvOp, n int) (int, error) {
	k := int(C.ferry_post_recvs(ep.e, (*C.struct_ferry_recv_op)(unsafe.Pointer(ops)), C.int(n)))
	return k, fromRet(ep.e.last_err)
}

// Poll reads up to max completions into evs (struct ferry_event, the
// layout of rdma.Event). A negative libfabric return other than EAGAIN
// and EAVAIL is returned as the error: the queue itself failed.
func (ep *Endpoint) Poll(evs *rdma.Event, max int) (int, error) {
	n := C.ferry_poll(ep.e, (*C.struct_ferry_event)(unsafe.Pointer(evs)), C.int(max))
	if n < 0 {
		return 0, Errno(-n)
	}
	return int(n), nil
}

// CompletionError is the text of one error completion read by Poll.
type CompletionError struct {
	Context   uint64
	Errno     int
	ProvErrno int
	Text      string
}

// ErrorCount is how many error completions the last Poll read.
func (ep *Endpoint) ErrorCount() int { return int(ep.e.nerr) }

// CompletionError returns the i-th error completion the last Poll read,
// with fi_cq_strerror's text, valid until the next Poll.
func (ep *Endpoint) CompletionError(i int) CompletionError {
	s := &ep.e.errs[i]
	return CompletionError{
		Context:   uint64(s.context),
		Errno:     int(s.err),
		ProvErrno: int(s.prov_errno),
		Text:      C.GoString(&s.text[0]),
	}
}

// RawLoop runs the C benchmark loop (ferry_raw_loop in raw.c): iters timed
// rounds after warmup untimed ones, each posting the n write ops on init and
// waiting for their completions and for the immediates at target. lat
// receives one duration in ns per timed round. On failure it returns the
// round that failed (negative for warmups).
func RawLoop(init, target *Endpoint, ops *rdma.WriteOp, n, iters, warmup int,
	timeout time.Duration, lat []int64) (int, error) {
	if len(lat) < iters {
		return 0, EINVAL
	}
	var phase C.int
	var latp *C.int64_t
	if iters > 0 {
		latp = (*C.int64_t)(unsafe.Pointer(&lat[0]))
	}
	ret := C.ferry_raw_loop(init.e, target.e, (*C.struct_ferry_write_op)(unsafe.Pointer(ops)), C.int(n),
		C.int(iters), C.int(warmup), C.int64_t(timeout.Nanoseconds()), latp, &phase)
	runtime.KeepAlive(lat)
	return int(phase), fromRet(ret)
}
