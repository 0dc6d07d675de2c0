package fabric

// Shape is what the number of immediates a request delivers depends on:
// its kind, its routing and how many pages, destinations or targets it
// names. Build one with SingleShape, PagedShape, ScatterShape, ImmShape or
// BarrierShape, or take it from a request with its Shape method, and pass
// it to ExpectedImms.
type Shape struct {
	kind   reqKind
	route  Routing
	sroute ScatterRouting
	count  int
	noImm  bool
}

// SingleShape is a single write routed by r.
func SingleShape(r Routing) Shape { return Shape{kind: reqSingle, route: r} }

// PagedShape is a paged write of pages pages.
func PagedShape(pages int) Shape { return Shape{kind: reqPaged, count: pages} }

// ScatterShape is a scatter routed by r, of which targets targets name the
// receiving region (a scatter's receivers each count only their own).
func ScatterShape(r ScatterRouting, targets int) Shape {
	return Shape{kind: reqScatter, sroute: r, count: targets}
}

// ImmShape is an immediate-only write.
func ImmShape() Shape { return Shape{kind: reqImm, count: 1} }

// BarrierShape is a barrier of which dsts destinations name the receiver.
func BarrierShape(dsts int) Shape { return Shape{kind: reqBarrier, count: dsts} }

// Shape returns r's shape (none of its immediates without an Imm).
func (r *SingleWrite) Shape() Shape {
	s := SingleShape(r.Route)
	s.noImm = !r.Imm.set
	return s
}

// Shape returns r's shape (none of its immediates without an Imm).
func (r *PagedWrite) Shape() Shape {
	s := PagedShape(len(r.SrcPages))
	s.noImm = !r.Imm.set
	return s
}

// Shape returns the shape of r as seen by a receiver that targets of its
// targets name (without an Imm, none).
func (r *ScatterWrite) Shape(targets int) Shape {
	s := ScatterShape(r.Route, targets)
	s.noImm = !r.Imm.set
	return s
}

// ExpectedImms returns how many immediates a request of shape s delivers
// to its receiver when the writer's group has writerNICs NICs and the
// receiving region's descriptor lists targetNICs (1 to MaxNICs each; the
// two need not be equal). It is the count a receiver waits for to know
// that every byte of the request has landed: immediates cross NICs
// unordered, so the first one says nothing about the rest.
//
//   - ImmShape: 1.
//   - BarrierShape(k): k, one per destination naming the receiver.
//   - SingleShape(Pinned(d)): 1.
//   - SingleShape(Sharded(n)): n, one per shard, empty shards included;
//     Sharded(0) shards over max(writerNICs, targetNICs), so every NIC of
//     the wider side carries a shard.
//   - PagedShape(p): p, one per page.
//   - ScatterShape(ShardPeers() or ScatterPinned(d), t): t, one per target.
//   - ScatterShape(ShardBytes(), t): t*writerNICs, each target's range
//     being split into one slice per writer NIC.
//
// Group sizes outside 1..MaxNICs, and a request that would be refused,
// give 0; so does a shape taken from a request without an Imm.
func ExpectedImms(s Shape, writerNICs, targetNICs int) int {
	if writerNICs < 1 || writerNICs > MaxNICs || targetNICs < 1 || targetNICs > MaxNICs || s.noImm {
		return 0
	}
	switch s.kind {
	case reqImm:
		return 1
	case reqBarrier, reqPaged:
		return max(s.count, 0)
	case reqSingle:
		if _, pinned := s.route.IsPinned(); pinned {
			return 1
		}
		n := s.route.n
		if n < 0 || n > lanes(writerNICs, targetNICs) {
			return 0
		}
		if n == 0 {
			n = lanes(writerNICs, targetNICs)
		}
		return n
	case reqScatter:
		t := max(s.count, 0)
		if s.sroute.mode == 1 {
			return t * writerNICs
		}
		return t
	}
	return 0
}
