package fabric

import (
	"strconv"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// Routing says how a Single, Imm or Barrier request uses the group's NICs.
// The zero value shards over every NIC of the group.
type Routing struct {
	pinned bool
	n      int // shards (0 = all NICs) or the pinned NIC index
}

// Sharded splits a Single write into n shards, one per NIC, taken
// round-robin; each shard delivers its own immediate. n = 0 means one per
// NIC of the wider of the writer's group and the target's descriptor, and
// n may be up to that many (see ExpectedImms).
func Sharded(n int) Routing { return Routing{n: n} }

// Pinned sends everything through NIC nic.
func Pinned(nic int) Routing { return Routing{pinned: true, n: nic} }

// IsPinned reports whether r pins one NIC, and which.
func (r Routing) IsPinned() (nic int, ok bool) { return r.n, r.pinned }

// ScatterRouting says how a Scatter spreads its targets over the NICs.
type ScatterRouting struct {
	mode uint8 // 0 shard peers, 1 shard bytes, 2 pinned
	nic  int
}

// ShardPeers gives each NIC a contiguous block of targets: one write and
// one immediate per target. It is the zero value.
func ShardPeers() ScatterRouting { return ScatterRouting{} }

// ShardBytes splits every target's range into one slice per NIC (the last
// slice takes the remainder; empty slices are zero-byte writes at offset
// 0): NICs writes and immediates per target.
func ShardBytes() ScatterRouting { return ScatterRouting{mode: 1} }

// ScatterPinned sends every target through NIC nic.
func ScatterPinned(nic int) ScatterRouting { return ScatterRouting{mode: 2, nic: nic} }

// ImmWrite is a zero-byte write that carries only an immediate: the
// receiver sees exactly one immediate.
type ImmWrite struct {
	Imm   uint32
	Dst   Descriptor
	Route Routing // Pinned(d), or the zero value for the next NIC round-robin
}

// Barrier is one zero-byte write with the immediate to each destination:
// each receiver sees one immediate per destination naming it. With a
// sharded route the destinations are split into contiguous blocks per NIC.
type Barrier struct {
	Imm   uint32
	Dsts  []Descriptor
	Route Routing
}

// Imm is the optional immediate of a write. Its zero value carries no
// immediate; Immediate(v) carries v, 0 included, so "no immediate" and
// "immediate 0" cannot be confused. Values at or above LeaseBase belong to
// leases (see Engine.LeaseImms): take them from a Lease, not by hand.
type Imm struct {
	v   uint32
	set bool
}

// Immediate returns the immediate v.
func Immediate(v uint32) Imm { return Imm{v: v, set: true} }

// Value returns the immediate and whether there is one.
func (i Imm) Value() (v uint32, ok bool) { return i.v, i.set }

// IsSet reports whether i carries an immediate.
func (i Imm) IsSet() bool { return i.set }

// String prints the value in hex, or "none".
func (i Imm) String() string {
	if !i.set {
		return "none"
	}
	return "0x" + strconv.FormatUint(uint64(i.v), 16)
}

// SingleWrite is one contiguous write of Length bytes from Src at
// SrcOffset to Dst at DstOffset. Sharded over n NICs it always posts
// exactly n writes (empty shards are zero-byte writes at offset 0), and with
// an Imm set the receiver sees n immediates; pinned, it posts one. Notify,
// when set, is delivered to the target after all the writes (see
// Notification).
type SingleWrite struct {
	Src       *MemoryRegion
	SrcOffset uint64
	Length    uint64
	Dst       Descriptor
	DstOffset uint64
	Imm       Imm
	Route     Routing
	Notify    *Notification
}

// PagedWrite is len(SrcPages) independent writes of Length bytes: page i
// goes from Src at SrcOffset+SrcStride*SrcPages[i] to Dst at
// DstOffset+DstStride*DstPages[i]. The page arrays are shared, not copied:
// do not modify them until the transfer completes. The pages are split into
// contiguous ranges, one per NIC; with an Imm set the receiver sees one
// immediate per page. Notify, when set, is delivered to the target after
// all the pages (see Notification).
type PagedWrite struct {
	Src       *MemoryRegion
	SrcPages  []uint32
	SrcStride uint64
	SrcOffset uint64
	Dst       Descriptor
	DstPages  []uint32
	DstStride uint64
	DstOffset uint64
	Length    uint64
	Imm       Imm
	Notify    *Notification
}

// ScatterTarget is one destination range of a Scatter.
type ScatterTarget struct {
	Dst       Descriptor
	Length    uint64
	SrcOffset uint64
	DstOffset uint64
}

// ScatterWrite writes ranges of one source region to many peers. The
// Targets slice is shared, not copied. With a PeerGroup, Targets must be in
// the group's peer order and as many as its peers; their addresses were
// resolved when the group was added. The receiver of each target sees one
// immediate (ShardPeers, ScatterPinned) or one per NIC (ShardBytes).
// Notify, when set, are notifications (typically one per target peer, to
// a lease's mailbox there) sent once every write of the scatter completed,
// so each reaches its peer after that peer's writes are visible there; they
// go in the order given, one at a time (see Notification), and the
// scatter's completion reports them too. The slice is copied at submit.
type ScatterWrite struct {
	Src     *MemoryRegion
	Targets []ScatterTarget
	Imm     Imm
	Route   ScatterRouting
	Group   PeerGroup
	Notify  []Notification
}

// PeerGroup is a handle to a cached list of peers (see Engine.AddPeerGroup).
// The zero value is no group.
type PeerGroup struct{ id uint32 }

// reqKind tags a queued request.
type reqKind uint8

const (
	reqImm reqKind = iota + 1
	reqBarrier
	reqSingle
	reqPaged
	reqScatter
	reqSend
	reqRecv
)

func (k reqKind) String() string {
	switch k {
	case reqImm:
		return "imm write"
	case reqBarrier:
		return "barrier"
	case reqSingle:
		return "single write"
	case reqPaged:
		return "paged write"
	case reqScatter:
		return "scatter"
	case reqSend:
		return "send"
	case reqRecv:
		return "recv"
	}
	return "request"
}

// name is what errors call a request of kind k with op flags flags: the
// kinds a read shares with writes (rdma.WriteRead) are named reads.
func (k reqKind) name(flags uint32) string {
	if flags&rdma.WriteRead != 0 {
		switch k {
		case reqSingle:
			return "single read"
		case reqPaged:
			return "paged read"
		case reqScatter:
			return "scatter read"
		}
	}
	return k.String()
}

// request is what travels from a submitting goroutine to a worker: a copy
// of the user's request (slices shared) and its completion.
type request struct {
	kind   reqKind
	c      Completion
	flags  uint32 // extra op flags of every op (rdma.WriteRead for reads)
	imm    uint32
	hasImm bool
	route  Routing
	sroute ScatterRouting
	group  PeerGroup
	src    *MemoryRegion
	srcOff uint64
	dstOff uint64
	length uint64
	dst    Descriptor
	dsts   []Descriptor
	// paged
	srcPages  []uint32
	dstPages  []uint32
	srcStride uint64
	dstStride uint64
	// scatter
	targets []ScatterTarget
	// send / recv
	to    Address
	slot  int32
	bytes uint64
}
