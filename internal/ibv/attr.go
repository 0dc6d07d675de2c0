package ibv

import (
	"errors"
	"syscall"
)

// ErrNoCgo is wrapped by every device call in a build without cgo.
var ErrNoCgo = errors.New("libibverbs unavailable: built with CGO_ENABLED=0")

// Errno is an error number returned by libibverbs. It is its own type so
// callers use errors.Is(err, syscall.ENOMEM) rather than comparing ints.
type Errno int32

func (e Errno) Error() string { return syscall.Errno(e).Error() }

// Is lets errors.Is match the equivalent syscall.Errno.
func (e Errno) Is(target error) bool {
	t, ok := target.(syscall.Errno)
	return ok && int32(t) == int32(e)
}

// OpError is a failed verbs call: which call, and its errno.
type OpError struct {
	Op    string
	Errno Errno
}

func (e *OpError) Error() string { return e.Op + ": " + e.Errno.Error() }
func (e *OpError) Unwrap() error { return e.Errno }

// QPState is enum ibv_qp_state.
type QPState uint8

// Queue-pair states.
const (
	QPSReset QPState = 0
	QPSInit  QPState = 1
	QPSRTR   QPState = 2
	QPSRTS   QPState = 3
	QPSSQD   QPState = 4
	QPSSQE   QPState = 5
	QPSErr   QPState = 6
)

func (s QPState) String() string {
	names := [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}
	if int(s) < len(names) {
		return names[s]
	}
	return "QPS(?)"
}

// Attribute mask bits (enum ibv_qp_attr_mask) that ferry uses.
const (
	AttrState           uint32 = 1 << 0
	AttrAccessFlags     uint32 = 1 << 3
	AttrPKeyIndex       uint32 = 1 << 4
	AttrPort            uint32 = 1 << 5
	AttrQKey            uint32 = 1 << 6
	AttrAV              uint32 = 1 << 7
	AttrPathMTU         uint32 = 1 << 8
	AttrTimeout         uint32 = 1 << 9
	AttrRetryCnt        uint32 = 1 << 10
	AttrRNRRetry        uint32 = 1 << 11
	AttrRQPSN           uint32 = 1 << 12
	AttrMaxQPRdAtomic   uint32 = 1 << 13
	AttrMinRNRTimer     uint32 = 1 << 15
	AttrSQPSN           uint32 = 1 << 16
	AttrMaxDestRdAtomic uint32 = 1 << 17
	AttrDestQPN         uint32 = 1 << 20
)

// Access flags (enum ibv_access_flags).
const (
	AccessLocalWrite  uint32 = 1 << 0
	AccessRemoteWrite uint32 = 1 << 1
	AccessRemoteRead  uint32 = 1 << 2
	// AccessRelaxedOrdering is optional: devices that lack it ignore it,
	// which is why it can be asked for unconditionally.
	AccessRelaxedOrdering uint32 = 1 << 20
)

// MTU is enum ibv_mtu.
type MTU uint8

// Path MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// Bytes returns the MTU in bytes, 0 for an unknown value.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// PortState is enum ibv_port_state.
type PortState uint8

// Port states.
const (
	PortNop    PortState = 0
	PortDown   PortState = 1
	PortInit   PortState = 2
	PortArmed  PortState = 3
	PortActive PortState = 4
)

func (s PortState) String() string {
	names := [...]string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"}
	if int(s) < len(names) {
		return names[s]
	}
	return "PORT(?)"
}

// LinkLayer is the port's IBV_LINK_LAYER_*.
type LinkLayer uint8

// Link layers.
const (
	LinkUnspecified LinkLayer = 0
	LinkInfiniBand  LinkLayer = 1
	LinkEthernet    LinkLayer = 2
)

func (l LinkLayer) String() string {
	switch l {
	case LinkInfiniBand:
		return "InfiniBand"
	case LinkEthernet:
		return "Ethernet"
	}
	return "unspecified"
}

// GIDType is enum ibv_gid_type.
type GIDType uint8

// GID types.
const (
	GIDTypeIB     GIDType = 0
	GIDTypeRoCEv1 GIDType = 1
	GIDTypeRoCEv2 GIDType = 2
)

func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCEv1"
	case GIDTypeRoCEv2:
		return "RoCEv2"
	}
	return "GID(?)"
}

// GIDEntry is one populated entry of a port's GID table.
type GIDEntry struct {
	Index int
	GID   [16]byte
	Type  GIDType
}

// DeviceAttr is the subset of ibv_device_attr ferry needs.
type DeviceAttr struct {
	FWVersion    string
	VendorID     uint32
	VendorPartID uint32
	PhysPorts    int
	MaxQP        int
	MaxQPWR      int
	MaxCQE       int
	MaxSRQWR     int
	MaxMRSize    uint64
	// MaxQPRdAtom and MaxQPInitRdAtom bound the RDMA READs a queue pair
	// serves and has outstanding (max_dest_rd_atomic, max_rd_atomic).
	MaxQPRdAtom     int
	MaxQPInitRdAtom int
}

// PortAttr is the subset of ibv_port_attr ferry needs.
type PortAttr struct {
	State       PortState
	MaxMTU      MTU
	ActiveMTU   MTU
	GIDTableLen int
	LID         uint16
	LinkLayer   LinkLayer
	ActiveWidth uint8  // IBV_WIDTH_* bits: 1=1x 2=4x 4=8x 8=12x 16=2x
	ActiveSpeed uint8  // IBV_SPEED_* bits
	MaxMsgSize  uint64 // max_msg_sz: the longest message or write
}

// DeviceName names a device and where sysfs describes it.
type DeviceName struct {
	Name      string
	IBDevPath string // /sys/class/infiniband/<name>
	DevPath   string // /sys/class/infiniband_verbs/uverbsN
}

// QPAttr is the plain-Go form of struct ibv_qp_attr plus its mask: the
// fields a reliable-connected queue pair's transitions use.
type QPAttr struct {
	State           QPState
	Mask            uint32
	Access          uint32
	DestQPN         uint32
	RQPSN           uint32
	SQPSN           uint32
	QKey            uint32
	PKeyIndex       uint16
	DLID            uint16
	Port            uint8
	PathMTU         MTU
	MaxDestRdAtomic uint8
	MaxRdAtomic     uint8
	MinRNRTimer     uint8
	Timeout         uint8
	RetryCnt        uint8
	RNRRetry        uint8
	IsGlobal        bool
	SGIDIndex       uint8
	HopLimit        uint8
	TrafficClass    uint8
	SL              uint8
	DGID            [16]byte
	FlowLabel       uint32
}

// Seg is one doorbell of a write batch: ops[First : First+Count] go to the
// same peer and are posted as one chained ibv_post_send.
type Seg struct {
	First, Count uint32
}

// MaxChain is the longest WR chain posted with one doorbell. Longer chains
// gave nothing in the reference design's measurements.
const MaxChain = 4

// wr_id layout, mirrored from shim.h: kind in the top byte, slot below.
const (
	WRKindShift  = 56
	WRKindWrite  = 1
	WRKindSend   = 2
	WRKindRecv   = 3
	WRKindImm    = 4
	WRKindUDRecv = 5
	WRKindUDSend = 6
	WRKindRead   = 7 // an RDMA READ: completes as a write, its access error is EPERM
)

// WCRemAccessErr is IBV_WC_REM_ACCESS_ERR.
const (
	WCRemAccessErr = 10
	UDMsgMax       = 256 - 40
)

// UDMsg is one received connection-management datagram (GRH removed). Its
// layout matches fy_ud_msg.
type UDMsg struct {
	Len   uint32
	SrcQP uint32
	Data  [UDMsgMax]byte
}

// Bytes returns the payload.
func (m *UDMsg) Bytes() []byte { return m.Data[:min(int(m.Len), len(m.Data))] }

// Config sizes the C side of a Dom.
type Config struct {
	CQE, Slots, RecvSlots uint32
	MsgSRQWR, RMASRQWR    uint32
	UDRecv, UDSend        uint32
	QKey                  uint32
	Port                  uint8
	WantThreadDomain      bool
}
