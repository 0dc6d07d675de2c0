//go:build cgo

package efa

import (
	"testing"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ofi"
)

// TestLayout checks that the Go op and event structs handed to C have the
// exact layout of the C structs in internal/ofi/shim.h.
func TestLayout(t *testing.T) {
	var w rdma.WriteOp
	var s rdma.SendOp
	var r rdma.RecvOp
	var e rdma.Event
	want := []uintptr{
		unsafe.Sizeof(w), unsafe.Offsetof(w.Local), unsafe.Offsetof(w.Length), unsafe.Offsetof(w.LocalDesc),
		unsafe.Offsetof(w.Remote), unsafe.Offsetof(w.RemoteKey), unsafe.Offsetof(w.Peer),
		unsafe.Offsetof(w.Context), unsafe.Offsetof(w.Imm), unsafe.Offsetof(w.Flags),
		unsafe.Sizeof(s), unsafe.Offsetof(s.Local), unsafe.Offsetof(s.Length), unsafe.Offsetof(s.LocalDesc),
		unsafe.Offsetof(s.Peer), unsafe.Offsetof(s.Context),
		unsafe.Sizeof(r), unsafe.Offsetof(r.Local), unsafe.Offsetof(r.Length), unsafe.Offsetof(r.LocalDesc),
		unsafe.Offsetof(r.Context),
		unsafe.Sizeof(e), unsafe.Offsetof(e.Context), unsafe.Offsetof(e.Length), unsafe.Offsetof(e.Kind),
		unsafe.Offsetof(e.Imm), unsafe.Offsetof(e.Errno), unsafe.Offsetof(e.ProvErrno),
	}
	got := ofi.Layout()
	if len(got) != len(want) {
		t.Fatalf("layout has %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != uint64(want[i]) {
			t.Errorf("layout entry %d: C %d, Go %d", i, got[i], want[i])
		}
	}
	// Field types matter too: the C side reads Imm and Flags as 32 bits.
	if unsafe.Sizeof(w.Imm) != 4 || unsafe.Sizeof(w.Flags) != 4 || unsafe.Sizeof(e.Kind) != 4 ||
		unsafe.Sizeof(e.Errno) != 4 || unsafe.Sizeof(e.ProvErrno) != 4 || unsafe.Sizeof(w.Peer) != 8 {
		t.Error("field widths differ from shim.h")
	}
	kinds := map[rdma.EventKind]uint32{
		rdma.EventWrite: ofi.EventWrite, rdma.EventSend: ofi.EventSend,
		rdma.EventRecv: ofi.EventRecv, rdma.EventImm: ofi.EventImm,
	}
	for k, c := range kinds {
		if uint32(k) != c {
			t.Errorf("event kind %v is %d in Go, %d in C", k, uint32(k), c)
		}
	}
	if rdma.WriteHasImm != ofi.WriteHasImm {
		t.Errorf("WriteHasImm %d in Go, %d in C", rdma.WriteHasImm, ofi.WriteHasImm)
	}
	if rdma.WriteDelivered != ofi.WriteDelivered || rdma.WriteVisible != ofi.WriteVisible {
		t.Errorf("WriteDelivered/WriteVisible %d/%d in Go, %d/%d in C", rdma.WriteDelivered, rdma.WriteVisible,
			ofi.WriteDelivered, ofi.WriteVisible)
	}
	if rdma.WriteRead != ofi.WriteRead {
		t.Errorf("WriteRead %d in Go, %d in C", rdma.WriteRead, ofi.WriteRead)
	}
}
