package fabric

import (
	"fmt"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// RDMA READ. A read is a write turned around: the same op contexts, FIFOs,
// splitting, deadlines, back-pressure and peer-loss handling carry it, and
// the provider gets it in the same batch as writes (rdma.WriteRead on the
// op), so a batch still costs one provider call and no op allocates. Only
// the direction differs: the local region is the destination, the remote
// descriptor the source, and no immediate travels (the target sees
// nothing; completion is at the initiator only).

// AccessRemoteRead lets peers read a region with SubmitRead. Remote write
// does not imply it: a region is readable only when registered with it.
const AccessRemoteRead = rdma.AccessRemoteRead

// ErrNotReadable is a read of a region its owner did not register with
// AccessRemoteRead. It comes back through the read's completion: only the
// target knows its regions' access.
var ErrNotReadable = rdma.ErrNotReadable

// SingleRead reads Length bytes from the remote region Src at SrcOffset
// into the local region Dst at DstOffset. Sharded over n NICs it posts n
// reads, one per NIC (empty shards are zero-byte reads); pinned, one.
type SingleRead struct {
	Dst       *MemoryRegion
	DstOffset uint64
	Length    uint64
	Src       Descriptor
	SrcOffset uint64
	Route     Routing
}

// PagedRead is len(DstPages) independent reads of Length bytes: page i
// comes from Src at SrcOffset+SrcStride*SrcPages[i] into Dst at
// DstOffset+DstStride*DstPages[i]. The page arrays are shared, not copied:
// do not modify them until the transfer completes. The pages are split
// into contiguous ranges, one per NIC.
type PagedRead struct {
	Dst       *MemoryRegion
	DstPages  []uint32
	DstStride uint64
	DstOffset uint64
	Src       Descriptor
	SrcPages  []uint32
	SrcStride uint64
	SrcOffset uint64
	Length    uint64
}

// SubmitRead posts a single read through the worker of the destination's
// device. Bad input is refused here with a typed error; a source region
// registered without AccessRemoteRead fails the transfer with an error
// matching ErrNotReadable (an unregistered one with ErrUnknownRegion).
func (e *Engine) SubmitRead(r SingleRead, c Completion) error {
	if e == nil {
		return errNilEngine
	}
	const op = "single read"
	if !r.Dst.validFor(e) {
		return e.readDstErr(op)
	}
	w := r.Dst.w
	if err := checkReads(op, w); err != nil {
		return err
	}
	if err := checkRoute(op, r.Route, len(w.doms)); err != nil {
		return err
	}
	if err := checkDesc(op, &r.Src, len(w.doms)); err != nil {
		return err
	}
	if !inRange(r.DstOffset, r.Length, r.Dst.span.Len) {
		return reqErr(op, ErrOutOfBounds, "destination [%d, +%d) of %d bytes", r.DstOffset, r.Length, r.Dst.span.Len)
	}
	if !r.Src.check(r.SrcOffset, r.Length) {
		return reqErr(op, ErrOutOfBounds, "source [%d, +%d) of %d bytes", r.SrcOffset, r.Length, r.Src.Length)
	}
	// The worker's single path names the local region src and the remote
	// one dst; the read flag turns every op around.
	q := request{kind: reqSingle, c: c, flags: rdma.WriteRead, route: r.Route, src: r.Dst,
		srcOff: r.DstOffset, dstOff: r.SrcOffset, length: r.Length, dst: r.Src}
	return e.enqueue(w, &q)
}

// SubmitPagedRead posts a paged read through the worker of the
// destination's device. Every page is bounds-checked against both regions
// first.
func (e *Engine) SubmitPagedRead(r PagedRead, c Completion) error {
	if e == nil {
		return errNilEngine
	}
	const op = "paged read"
	if !r.Dst.validFor(e) {
		return e.readDstErr(op)
	}
	w := r.Dst.w
	if err := checkReads(op, w); err != nil {
		return err
	}
	if len(r.SrcPages) != len(r.DstPages) {
		return reqErr(op, ErrInvalidArgument, "%d source pages but %d destination pages", len(r.SrcPages), len(r.DstPages))
	}
	if len(r.DstPages) == 0 {
		return reqErr(op, ErrInvalidArgument, "no pages")
	}
	if err := checkDesc(op, &r.Src, len(w.doms)); err != nil {
		return err
	}
	dlen, slen := r.Dst.span.Len, r.Src.Length
	for i, p := range r.DstPages {
		if !pageInRange(r.DstOffset, r.DstStride, p, r.Length, dlen) {
			return reqErr(op, ErrOutOfBounds, "destination page %d (index %d, stride %d, offset %d, %d bytes) outside %d bytes",
				i, p, r.DstStride, r.DstOffset, r.Length, dlen)
		}
		if !pageInRange(r.SrcOffset, r.SrcStride, r.SrcPages[i], r.Length, slen) {
			return reqErr(op, ErrOutOfBounds, "source page %d (index %d, stride %d, offset %d, %d bytes) outside %d bytes",
				i, r.SrcPages[i], r.SrcStride, r.SrcOffset, r.Length, slen)
		}
	}
	q := request{kind: reqPaged, c: c, flags: rdma.WriteRead, src: r.Dst,
		srcPages: r.DstPages, dstPages: r.SrcPages, srcStride: r.DstStride, dstStride: r.SrcStride,
		srcOff: r.DstOffset, dstOff: r.SrcOffset, length: r.Length, dst: r.Src}
	return e.enqueue(w, &q)
}

// readDstErr explains a destination region a read cannot use.
func (e *Engine) readDstErr(op string) error {
	if e.life.closed.Load() {
		return ErrClosed
	}
	return reqErr(op, ErrUnknownRegion, "destination")
}

// checkReads refuses reads on a group with a domain whose provider does
// not carry them out.
func checkReads(op string, w *worker) error {
	for _, ds := range w.doms {
		if !ds.info.Reads {
			return reqErr(op, ErrNotSupported, "transport %s does not do RDMA READ", ds.info.Transport)
		}
	}
	return nil
}

// checkAccess refuses access bits the engine does not know and remote
// read on a group whose providers cannot serve reads.
func checkAccess(w *worker, access Access) error {
	if access&^(AccessRemoteWrite|AccessRemoteRead) != 0 {
		return fmt.Errorf("register: access %#x: %w", access, ErrInvalidArgument)
	}
	if access&AccessRemoteRead != 0 {
		for _, ds := range w.doms {
			if !ds.info.Reads {
				return fmt.Errorf("register with remote read: transport %s does not do RDMA READ: %w",
					ds.info.Transport, ErrNotSupported)
			}
		}
	}
	return nil
}

// ScatterSource is one remote range of a ScatterRead: Length bytes from
// Src at SrcOffset into the read's local region at DstOffset.
//
// Its fields are laid out as ScatterTarget's, turned around (see
// scatterTargets): keep the two in step.
type ScatterSource struct {
	Src       Descriptor
	Length    uint64
	DstOffset uint64
	SrcOffset uint64
}

// ScatterRead reads ranges of one or more peers' regions into one local
// region: the scatter shape turned around. The Sources slice is shared,
// not copied: do not modify it until the transfer completes. Route spreads
// the sources over the NICs as it spreads a ScatterWrite's targets
// (ShardPeers, ShardBytes, ScatterPinned); with a PeerGroup, Sources must
// be in the group's peer order and as many as its peers. No immediate
// travels: the peers see nothing, and the read completes at the reader.
type ScatterRead struct {
	Dst     *MemoryRegion
	Sources []ScatterSource
	Route   ScatterRouting
	Group   PeerGroup
}

// The worker carries a scatter read on its scatter path with every op
// turned around (rdma.WriteRead): a target's Dst is then the remote
// source, its SrcOffset the local offset and its DstOffset the remote
// one, which is exactly where ScatterSource keeps them. These constants
// fail to compile if the layouts ever drift apart.
const (
	_ = uint(unsafe.Offsetof(ScatterSource{}.Src) - unsafe.Offsetof(ScatterTarget{}.Dst))
	_ = uint(unsafe.Offsetof(ScatterTarget{}.Dst) - unsafe.Offsetof(ScatterSource{}.Src))
	_ = uint(unsafe.Offsetof(ScatterSource{}.Length) - unsafe.Offsetof(ScatterTarget{}.Length))
	_ = uint(unsafe.Offsetof(ScatterTarget{}.Length) - unsafe.Offsetof(ScatterSource{}.Length))
	_ = uint(unsafe.Offsetof(ScatterSource{}.DstOffset) - unsafe.Offsetof(ScatterTarget{}.SrcOffset))
	_ = uint(unsafe.Offsetof(ScatterTarget{}.SrcOffset) - unsafe.Offsetof(ScatterSource{}.DstOffset))
	_ = uint(unsafe.Offsetof(ScatterSource{}.SrcOffset) - unsafe.Offsetof(ScatterTarget{}.DstOffset))
	_ = uint(unsafe.Offsetof(ScatterTarget{}.DstOffset) - unsafe.Offsetof(ScatterSource{}.SrcOffset))
	_ = uint(unsafe.Sizeof(ScatterSource{}) - unsafe.Sizeof(ScatterTarget{}))
	_ = uint(unsafe.Sizeof(ScatterTarget{}) - unsafe.Sizeof(ScatterSource{}))
)

// scatterTargets views sources as the scatter targets the worker walks,
// without copying (a submit allocates nothing).
func scatterTargets(sources []ScatterSource) []ScatterTarget {
	return unsafe.Slice((*ScatterTarget)(unsafe.Pointer(unsafe.SliceData(sources))), len(sources))
}

// SubmitScatterRead posts a scatter read through the worker of the
// destination's device. Every source is checked against its descriptor
// and the local region first; a source region registered without
// AccessRemoteRead fails the transfer with ErrNotReadable, a lost peer
// with ErrPeerLost (a PeerError naming it), as for the other reads.
func (e *Engine) SubmitScatterRead(r ScatterRead, c Completion) error {
	if e == nil {
		return errNilEngine
	}
	const op = "scatter read"
	if !r.Dst.validFor(e) {
		return e.readDstErr(op)
	}
	w := r.Dst.w
	if err := checkReads(op, w); err != nil {
		return err
	}
	n := len(w.doms)
	if len(r.Sources) == 0 {
		return reqErr(op, ErrInvalidArgument, "no sources")
	}
	if r.Route.mode == 2 && (r.Route.nic < 0 || r.Route.nic >= n) {
		return reqErr(op, ErrInvalidArgument, "pinned nic %d of %d", r.Route.nic, n)
	}
	for i := range r.Sources {
		s := &r.Sources[i]
		if err := checkDesc(op, &s.Src, n); err != nil {
			return err
		}
		if !inRange(s.DstOffset, s.Length, r.Dst.span.Len) {
			return reqErr(op, ErrOutOfBounds, "source %d destination [%d, +%d) of %d bytes", i, s.DstOffset, s.Length, r.Dst.span.Len)
		}
		if !s.Src.check(s.SrcOffset, s.Length) {
			return reqErr(op, ErrOutOfBounds, "source %d [%d, +%d) of %d bytes", i, s.SrcOffset, s.Length, s.Src.Length)
		}
	}
	q := request{kind: reqScatter, c: c, flags: rdma.WriteRead, src: r.Dst,
		targets: scatterTargets(r.Sources), sroute: r.Route, group: r.Group}
	return e.enqueue(w, &q)
}
