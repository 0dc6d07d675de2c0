//go:build cgo

package ibv

/*
#cgo LDFLAGS: -libverbs
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// Dom is the C side of one verbs domain (see the package doc). Not safe for
// concurrent use.
type Dom struct {
	d *C.fy_dom
}

// OpenDom opens device name and builds a domain's fixed resources.
func OpenDom(name string, cfg Config) (*Dom, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	c := C.fy_config{
		cqe: C.uint32_t(cfg.CQE), slots: C.uint32_t(cfg.Slots), recv_slots: C.uint32_t(cfg.RecvSlots),
		msg_srq_wr: C.uint32_t(cfg.MsgSRQWR), rma_srq_wr: C.uint32_t(cfg.RMASRQWR),
		ud_recv: C.uint32_t(cfg.UDRecv), ud_send: C.uint32_t(cfg.UDSend),
		qkey: C.uint32_t(cfg.QKey), port: C.uint8_t(cfg.Port),
	}
	if cfg.WantThreadDomain {
		c.want_td = 1
	}
	var d *C.fy_dom
	var stage *C.char
	if rc := C.fy_open(cname, &c, &d, &stage); rc != 0 {
		return nil, &OpError{Op: C.GoString(stage), Errno: Errno(rc)}
	}
	return &Dom{d: d}, nil
}

// Close releases the domain's resources. Queue pairs, address handles and
// memory registrations made through it must be released first.
func (d *Dom) Close() {
	if d == nil || d.d == nil {
		return
	}
	C.fy_close(d.d)
	d.d = nil
}

// Context returns the device context, for queries. Do not close it.
func (d *Dom) Context() *Context { return &Context{c: d.d.ctx} }

// ThreadDomain reports whether the domain got a thread domain and parent
// domain (lock-free posting on providers that support it).
func (d *Dom) ThreadDomain() bool { return d.d.td != nil }

// UDQPN returns the number of the domain's UD queue pair.
func (d *Dom) UDQPN() uint32 { return uint32(C.fy_ud_qpn(d.d)) }

// Dropped counts internal completions that carried nothing to report.
func (d *Dom) Dropped() uint64 { return uint64(d.d.dropped) }

// QP is a reliable-connected queue pair.
type QP struct {
	q   *C.struct_ibv_qp
	Num uint32
}

// Valid reports whether q refers to a queue pair.
func (q QP) Valid() bool { return q.q != nil }

// CreateRCQP creates an RC queue pair on the shared CQ, attached to the RMA
// SRQ (rma) or the message SRQ.
func (d *Dom) CreateRCQP(rma bool, maxSendWR uint32) (QP, error) {
	var num C.uint32_t
	var e C.int
	r := C.int(0)
	if rma {
		r = 1
	}
	q := C.fy_create_rc_qp(d.d, r, C.uint32_t(maxSendWR), &num, &e)
	if q == nil {
		return QP{}, &OpError{Op: "ibv_create_qp(rc)", Errno: Errno(e)}
	}
	return QP{q: q, Num: uint32(num)}, nil
}

// Modify applies a.
func (q QP) Modify(a *QPAttr) error {
	c := C.fy_qp_attr{
		state: C.uint32_t(a.State), mask: C.uint32_t(a.Mask), access: C.uint32_t(a.Access),
		dest_qpn: C.uint32_t(a.DestQPN), rq_psn: C.uint32_t(a.RQPSN), sq_psn: C.uint32_t(a.SQPSN),
		qkey: C.uint32_t(a.QKey), pkey_index: C.uint16_t(a.PKeyIndex), dlid: C.uint16_t(a.DLID),
		port: C.uint8_t(a.Port), path_mtu: C.uint8_t(a.PathMTU),
		max_dest_rd_atomic: C.uint8_t(a.MaxDestRdAtomic), max_rd_atomic: C.uint8_t(a.MaxRdAtomic),
		min_rnr_timer: C.uint8_t(a.MinRNRTimer), timeout: C.uint8_t(a.Timeout),
		retry_cnt: C.uint8_t(a.RetryCnt), rnr_retry: C.uint8_t(a.RNRRetry),
		sgid_index: C.uint8_t(a.SGIDIndex), hop_limit: C.uint8_t(a.HopLimit),
		traffic_class: C.uint8_t(a.TrafficClass), sl: C.uint8_t(a.SL), flow_label: C.uint32_t(a.FlowLabel),
	}
	if a.IsGlobal {
		c.is_global = 1
	}
	for i, b := range a.DGID {
		c.dgid[i] = C.uint8_t(b)
	}
	if rc := C.fy_modify_qp(q.q, &c); rc != 0 {
		return &OpError{Op: "ibv_modify_qp(" + a.State.String() + ")", Errno: Errno(rc)}
	}
	return nil
}

// Destroy destroys the queue pair.
func (q QP) Destroy() error {
	if q.q == nil {
		return nil
	}
	if rc := C.fy_destroy_qp(q.q); rc != 0 {
		return &OpError{Op: "ibv_destroy_qp", Errno: Errno(rc)}
	}
	return nil
}

// SetPeer makes peer idx's queue pairs visible to the post helpers; zero
// QPs hide the peer again (ops to it are then refused with ENOTCONN).
func (d *Dom) SetPeer(idx uint32, msg, rma QP) error {
	if rc := C.fy_set_peer(d.d, C.uint32_t(idx), msg.q, rma.q); rc != 0 {
		return &OpError{Op: "set peer", Errno: Errno(rc)}
	}
	return nil
}

// AH is an address handle for UD sends.
type AH struct{ a *C.struct_ibv_ah }

// Valid reports whether a refers to an address handle.
func (a AH) Valid() bool { return a.a != nil }

// CreateAH creates an address handle to a remote port.
func (d *Dom) CreateAH(gid [16]byte, lid uint16, global bool, sgidIndex, hopLimit uint8) (AH, error) {
	var e C.int
	g := C.int(0)
	if global {
		g = 1
	}
	a := C.fy_create_ah(d.d, (*C.uint8_t)(unsafe.Pointer(&gid[0])), C.uint16_t(lid), g,
		C.uint8_t(sgidIndex), C.uint8_t(hopLimit), &e)
	if a == nil {
		return AH{}, &OpError{Op: "ibv_create_ah", Errno: Errno(e)}
	}
	return AH{a: a}, nil
}

// Destroy destroys the address handle.
func (a AH) Destroy() {
	if a.a != nil {
		C.fy_destroy_ah(a.a)
	}
}

// UDSend sends one datagram; EAGAIN means every send buffer is in flight.
func (d *Dom) UDSend(ah AH, qpn uint32, msg []byte) error {
	if len(msg) == 0 {
		return &OpError{Op: "ud send", Errno: Errno(22)}
	}
	rc := C.fy_ud_send(d.d, ah.a, C.uint32_t(qpn), (*C.uint8_t)(unsafe.Pointer(&msg[0])), C.uint32_t(len(msg)))
	runtime.KeepAlive(msg)
	if rc != 0 {
		return &OpError{Op: "ibv_post_send(ud)", Errno: Errno(rc)}
	}
	return nil
}

// MR is a memory registration.
type MR struct{ m *C.struct_ibv_mr }

// RegMR registers [addr, addr+length); dmabufFD >= 0 registers the
// dma-buf's bytes from dmabufOffset on, with iova = addr.
func (d *Dom) RegMR(addr uintptr, length uint64, access uint32, dmabufFD int, dmabufOffset uint64) (MR, error) {
	// A Go local, not out_n: registration runs beside the data path
	// (and beside other registrations), which use out_n.
	var e C.int
	m := C.fy_reg_mr(d.d, C.uint64_t(addr), C.uint64_t(length), C.int(access), C.int(dmabufFD),
		C.uint64_t(dmabufOffset), &e)
	if m == nil {
		op := "ibv_reg_mr"
		if dmabufFD >= 0 {
			op = "ibv_reg_dmabuf_mr"
		}
		return MR{}, &OpError{Op: op, Errno: Errno(e)}
	}
	return MR{m: m}, nil
}

// Keys returns the local and remote keys.
func (m MR) Keys() (lkey, rkey uint32) { return uint32(m.m.lkey), uint32(m.m.rkey) }

// Handle is the registration's identity, stable for its lifetime.
func (m MR) Handle() uintptr { return uintptr(unsafe.Pointer(m.m)) }

// Dereg releases the registration.
func (m MR) Dereg() error {
	if rc := C.fy_dereg_mr(m.m); rc != 0 {
		return &OpError{Op: "ibv_dereg_mr", Errno: Errno(rc)}
	}
	return nil
}

// PostWrites posts segs (chains over the write ops at ops, laid out as the
// contract's WriteOp, which fy_write_op mirrors) and returns how many ops
// were accepted, with the errno that stopped it (0 when all were posted).
// Like internal/ofi, this package takes the contract's op arrays (package
// rdma, a leaf) in place: it does not depend on the engine.
func (d *Dom) PostWrites(ops *rdma.WriteOp, segs []Seg) (int, Errno) {
	if len(segs) == 0 {
		return 0, 0
	}
	rc := C.fy_post_writes(d.d, (*C.fy_write_op)(unsafe.Pointer(ops)),
		(*C.fy_seg)(unsafe.Pointer(&segs[0])), C.int(len(segs)), &d.d.out_n)
	return int(d.d.out_n), Errno(rc)
}

// PostSends posts the n send ops at ops (the contract's rdma.SendOp) on the
// peers' message queue pairs.
func (d *Dom) PostSends(ops *rdma.SendOp, n int) (int, Errno) {
	if n == 0 {
		return 0, 0
	}
	rc := C.fy_post_sends(d.d, (*C.fy_send_op)(unsafe.Pointer(ops)), C.int(n), &d.d.out_n)
	return int(d.d.out_n), Errno(rc)
}

// PostRecvs posts the n receive ops at ops (the contract's rdma.RecvOp) on
// the message SRQ.
func (d *Dom) PostRecvs(ops *rdma.RecvOp, n int) (int, Errno) {
	if n == 0 {
		return 0, 0
	}
	rc := C.fy_post_recvs(d.d, (*C.fy_recv_op)(unsafe.Pointer(ops)), C.int(n), &d.d.out_n)
	return int(d.d.out_n), Errno(rc)
}

// Poll reaps up to max completions into the events at ev (the contract's
// Event layout) and handshake datagrams into ud.
func (d *Dom) Poll(ev *rdma.Event, max int, ud []UDMsg) (nev, nud int, err error) {
	if max == 0 || len(ud) == 0 {
		return 0, 0, nil
	}
	rc := C.fy_poll(d.d, (*C.fy_event)(unsafe.Pointer(ev)), C.int(max),
		(*C.fy_ud_msg)(unsafe.Pointer(&ud[0])), C.int(len(ud)), &d.d.out_n)
	if rc < 0 {
		return 0, int(d.d.out_n), &OpError{Op: "ibv_poll_cq", Errno: Errno(-rc)}
	}
	return int(rc), int(d.d.out_n), nil
}

// TakeErrQPs stores the numbers of the queue pairs that reported an error
// completion since the last call (up to len(out)) and forgets them.
func (d *Dom) TakeErrQPs(out []uint32) int {
	if d.d.nerr_qp == 0 || len(out) == 0 {
		return 0
	}
	return int(C.fy_take_err_qps(d.d, (*C.uint32_t)(unsafe.Pointer(&out[0])), C.int(len(out))))
}

// Layout facts the tests compare with the Go mirrors.
var (
	sizeofWriteOp = int(C.sizeof_fy_write_op)
	sizeofSendOp  = int(C.sizeof_fy_send_op)
	sizeofRecvOp  = int(C.sizeof_fy_recv_op)
	sizeofEvent   = int(C.sizeof_fy_event)
	sizeofUDMsg   = int(C.sizeof_fy_ud_msg)
	sizeofSeg     = int(C.sizeof_fy_seg)
	cKindShift    = int(C.FY_KIND_SHIFT)
	cUDMsgMax     = int(C.FY_UD_MSG_MAX)
	cConsts       = map[string]int64{
		"IBV_QPS_RTS": C.IBV_QPS_RTS, "IBV_QPS_ERR": C.IBV_QPS_ERR,
		"IBV_QP_DEST_QPN": C.IBV_QP_DEST_QPN, "IBV_QP_MAX_DEST_RD_ATOMIC": C.IBV_QP_MAX_DEST_RD_ATOMIC,
		"IBV_QP_SQ_PSN": C.IBV_QP_SQ_PSN, "IBV_QP_MIN_RNR_TIMER": C.IBV_QP_MIN_RNR_TIMER,
		"IBV_QP_AV": C.IBV_QP_AV, "IBV_ACCESS_RELAXED_ORDERING": C.IBV_ACCESS_RELAXED_ORDERING,
		"IBV_GID_TYPE_ROCE_V2": C.IBV_GID_TYPE_ROCE_V2, "IBV_MTU_4096": C.IBV_MTU_4096,
		"IBV_PORT_ACTIVE": C.IBV_PORT_ACTIVE, "IBV_LINK_LAYER_ETHERNET": C.IBV_LINK_LAYER_ETHERNET,
	}
)
