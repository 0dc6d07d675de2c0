package verbs

import (
	"math"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ibv"
)

// verdict says what can happen to an op now.
type verdict uint8

const (
	postNow verdict = iota // its peer is connected and has no backlog
	holdOp                 // accept it and keep it until the peer is connected
	badOp                  // it can never be posted
)

// planWrites groups the front of ops into doorbells: runs of consecutive
// ops to the same peer, at most ibv.MaxChain long, written to segs. It
// stops at the first op that cannot be posted now, when segs is full, or at
// the end. It returns the segments, how many ops they cover, and the
// verdict on ops[covered] (postNow when it stopped for room or at the end).
func planWrites(ops []rdma.WriteOp, segs []ibv.Seg, judge func(*rdma.WriteOp) verdict) (nseg, covered int, v verdict) {
	for covered < len(ops) {
		op := &ops[covered]
		if v = judge(op); v != postNow {
			return nseg, covered, v
		}
		if nseg > 0 {
			s := &segs[nseg-1]
			if s.Count < ibv.MaxChain && ops[s.First].Peer == op.Peer {
				s.Count++
				covered++
				continue
			}
		}
		if nseg == len(segs) {
			return nseg, covered, postNow
		}
		segs[nseg] = ibv.Seg{First: uint32(covered), Count: 1}
		nseg++
		covered++
	}
	return nseg, covered, postNow
}

// validWrite reports whether an op fits a verbs work request: one SGE
// carries at most 4 GiB - 1 bytes.
func validWrite(op *rdma.WriteOp) bool {
	return op.Length <= math.MaxUint32 && (op.Length == 0 || op.Local != 0)
}
