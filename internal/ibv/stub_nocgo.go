//go:build !cgo

package ibv

import "github.com/ferryrdma/ferry/fabric/rdma"

// This file keeps the package's API in builds without cgo; every call that
// would touch a device fails with ErrNoCgo.

// DeviceNames fails without cgo.
func DeviceNames() ([]DeviceName, error) { return nil, ErrNoCgo }

// Context is unusable without cgo.
type Context struct{}

// OpenDevice fails without cgo.
func OpenDevice(string) (*Context, error) { return nil, ErrNoCgo }

// Close does nothing.
func (*Context) Close() error { return nil }

// QueryDevice fails without cgo.
func (*Context) QueryDevice() (DeviceAttr, error) { return DeviceAttr{}, ErrNoCgo }

// QueryPort fails without cgo.
func (*Context) QueryPort(int) (PortAttr, error) { return PortAttr{}, ErrNoCgo }

// GIDs returns nothing without cgo.
func (*Context) GIDs(int, int) []GIDEntry { return nil }

// WCStatusString has no library text without cgo.
func WCStatusString(status int) string { return "wc status" }

// Dom is unusable without cgo.
type Dom struct{}

// OpenDom fails without cgo.
func OpenDom(string, Config) (*Dom, error) { return nil, ErrNoCgo }

// Close does nothing.
func (*Dom) Close() {}

// Context returns an unusable context.
func (*Dom) Context() *Context { return &Context{} }

// ThreadDomain is false without cgo.
func (*Dom) ThreadDomain() bool { return false }

// UDQPN is 0 without cgo.
func (*Dom) UDQPN() uint32 { return 0 }

// Dropped is 0 without cgo.
func (*Dom) Dropped() uint64 { return 0 }

// QP is unusable without cgo.
type QP struct{ Num uint32 }

// Valid is false without cgo.
func (QP) Valid() bool { return false }

// CreateRCQP fails without cgo.
func (*Dom) CreateRCQP(bool, uint32) (QP, error) { return QP{}, ErrNoCgo }

// Modify fails without cgo.
func (QP) Modify(*QPAttr) error { return ErrNoCgo }

// Destroy does nothing.
func (QP) Destroy() error { return nil }

// SetPeer fails without cgo.
func (*Dom) SetPeer(uint32, QP, QP) error { return ErrNoCgo }

// AH is unusable without cgo.
type AH struct{}

// Valid is false without cgo.
func (AH) Valid() bool { return false }

// CreateAH fails without cgo.
func (*Dom) CreateAH([16]byte, uint16, bool, uint8, uint8) (AH, error) { return AH{}, ErrNoCgo }

// Destroy does nothing.
func (AH) Destroy() {}

// UDSend fails without cgo.
func (*Dom) UDSend(AH, uint32, []byte) error { return ErrNoCgo }

// MR is unusable without cgo.
type MR struct{}

// RegMR fails without cgo.
func (*Dom) RegMR(uintptr, uint64, uint32, int, uint64) (MR, error) { return MR{}, ErrNoCgo }

// Keys is zero without cgo.
func (MR) Keys() (uint32, uint32) { return 0, 0 }

// Handle is zero without cgo.
func (MR) Handle() uintptr { return 0 }

// Dereg does nothing.
func (MR) Dereg() error { return nil }

// PostWrites accepts nothing without cgo.
func (*Dom) PostWrites(*rdma.WriteOp, []Seg) (int, Errno) { return 0, 38 }

// PostSends accepts nothing without cgo.
func (*Dom) PostSends(*rdma.SendOp, int) (int, Errno) { return 0, 38 }

// PostRecvs accepts nothing without cgo.
func (*Dom) PostRecvs(*rdma.RecvOp, int) (int, Errno) { return 0, 38 }

// Poll finds nothing without cgo.
func (*Dom) Poll(*rdma.Event, int, []UDMsg) (int, int, error) { return 0, 0, ErrNoCgo }

// TakeErrQPs finds nothing without cgo.
func (*Dom) TakeErrQPs([]uint32) int { return 0 }
