//go:build cgo

package ibv

import (
	"errors"
	"syscall"
	"testing"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// The C helpers read fabric's op and event slices in place, so their
// layouts must agree byte for byte.
func TestLayoutsMatchC(t *testing.T) {
	for _, c := range []struct {
		name   string
		goSize uintptr
		cSize  int
	}{
		{"WriteOp", unsafe.Sizeof(rdma.WriteOp{}), sizeofWriteOp},
		{"SendOp", unsafe.Sizeof(rdma.SendOp{}), sizeofSendOp},
		{"RecvOp", unsafe.Sizeof(rdma.RecvOp{}), sizeofRecvOp},
		{"Event", unsafe.Sizeof(rdma.Event{}), sizeofEvent},
		{"UDMsg", unsafe.Sizeof(UDMsg{}), sizeofUDMsg},
		{"Seg", unsafe.Sizeof(Seg{}), sizeofSeg},
	} {
		if int(c.goSize) != c.cSize {
			t.Errorf("%s: Go %d bytes, C %d", c.name, c.goSize, c.cSize)
		}
	}
	var w rdma.WriteOp
	if unsafe.Offsetof(w.Imm) != 56 || unsafe.Offsetof(w.Context) != 48 || unsafe.Offsetof(w.Peer) != 40 {
		t.Error("WriteOp field offsets moved")
	}
	var e rdma.Event
	if unsafe.Offsetof(e.Kind) != 16 || unsafe.Offsetof(e.Errno) != 24 {
		t.Error("Event field offsets moved")
	}
	if cKindShift != WRKindShift || cUDMsgMax != UDMsgMax {
		t.Error("wr_id layout or UD buffer size differs from shim.h")
	}
	if rdma.EventWrite != 1 || rdma.EventSend != 2 || rdma.EventRecv != 3 || rdma.EventImm != 4 {
		t.Error("rdma.EventKind values differ from FY_EV_*")
	}
}

// The Go mirrors of verbs.h enums must equal the header's values.
func TestConstantsMatchHeader(t *testing.T) {
	for name, goVal := range map[string]int64{
		"IBV_QPS_RTS": int64(QPSRTS), "IBV_QPS_ERR": int64(QPSErr),
		"IBV_QP_DEST_QPN": int64(AttrDestQPN), "IBV_QP_MAX_DEST_RD_ATOMIC": int64(AttrMaxDestRdAtomic),
		"IBV_QP_SQ_PSN": int64(AttrSQPSN), "IBV_QP_MIN_RNR_TIMER": int64(AttrMinRNRTimer),
		"IBV_QP_AV": int64(AttrAV), "IBV_ACCESS_RELAXED_ORDERING": int64(AccessRelaxedOrdering),
		"IBV_GID_TYPE_ROCE_V2": int64(GIDTypeRoCEv2), "IBV_MTU_4096": int64(MTU4096),
		"IBV_PORT_ACTIVE": int64(PortActive), "IBV_LINK_LAYER_ETHERNET": int64(LinkEthernet),
	} {
		if c, ok := cConsts[name]; !ok || c != goVal {
			t.Errorf("%s: Go %d, C %d", name, goVal, c)
		}
	}
}

func TestErrno(t *testing.T) {
	err := error(&OpError{Op: "ibv_reg_mr", Errno: Errno(syscall.ENOMEM)})
	if !errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EINVAL) {
		t.Fatalf("errors.Is on %v", err)
	}
	if err.Error() != "ibv_reg_mr: cannot allocate memory" {
		t.Fatalf("message %q", err.Error())
	}
	if MTU4096.Bytes() != 4096 || MTU(9).Bytes() != 0 {
		t.Fatal("MTU bytes")
	}
}

// TestDeviceNames runs everywhere: on a machine without RDMA the library
// must fail with ENOSYS (or find none), never crash.
func TestDeviceNames(t *testing.T) {
	names, err := DeviceNames()
	if err != nil {
		if !errors.Is(err, syscall.ENOSYS) {
			t.Fatalf("ibv_get_device_list: %v (want ENOSYS without RDMA)", err)
		}
		t.Logf("no RDMA subsystem: %v", err)
		return
	}
	for _, n := range names {
		c, err := OpenDevice(n.Name)
		if err != nil {
			t.Fatalf("open %s: %v", n.Name, err)
		}
		a, err := c.QueryDevice()
		if err != nil || a.PhysPorts < 1 {
			t.Fatalf("query %s: %+v %v", n.Name, a, err)
		}
		p, err := c.QueryPort(1)
		if err != nil {
			t.Fatalf("query port: %v", err)
		}
		t.Logf("%s: %d ports, port 1 %v %v mtu %d, %d GIDs", n.Name, a.PhysPorts, p.State, p.LinkLayer, p.ActiveMTU.Bytes(), len(c.GIDs(1, p.GIDTableLen)))
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := OpenDevice("no-such-device"); !errors.Is(err, syscall.ENODEV) {
		t.Fatalf("open missing device: %v", err)
	}
}
