package fabric

import "github.com/ferryrdma/ferry/fabric/rdma"

// Large writes. A write longer than its domain's piece size is posted as
// consecutive pieces of at most that size:
//
//   - the piece size is the provider's largest write (DomainInfo.MaxWrite,
//     which providers query: fi_info's max_msg_size, the port's
//     max_msg_sz), capped at maxPiece, and one provider call posts at most
//     one piece of a split write: no single call works through more than
//     a bounded number of bytes (libfabric 1.17's shm copies a write's
//     bytes inside fi_writemsg, with process_vm_writev, while it holds the
//     target's lock; mem and ipc copy inside PostWrites), so the watchdog
//     sees calls end during a transfer of any length instead of one call
//     that lasts as long as the whole copy;
//   - a split context keeps at most splitWindow pieces in flight, which
//     bounds what a target that moves the bytes itself has to do in one
//     poll;
//   - the immediate rides on the last piece of each write only, so the
//     receiver sees what it would see without the split. On a domain that
//     does not order writes to one peer (DomainInfo.OrderedWrites false),
//     that last piece is posted only once every earlier piece of its
//     context has completed: its immediate must not overtake their bytes.
//
// A write of at most the piece size (every write of a region no longer
// than it) is not split and takes the usual path: splitting costs one
// comparison per context at accept.

const (
	// maxPiece bounds one posted write. Copies of fresh memory run at
	// 100-400 MB/s on a loaded machine here (page faults included:
	// process_vm_writev of 64 MiB took 0.4-0.9 s), so a 16 MiB piece
	// keeps one call well under a second, far below the watchdog's
	// timeout, and is still large enough that per-op costs vanish.
	maxPiece = 16 << 20
	// splitWindow is how many pieces of one context may be in flight.
	splitWindow = 4
)

// pieceSize is the largest write the engine posts on a domain.
func pieceSize(info DomainInfo) uint64 {
	if info.MaxWrite > 0 && info.MaxWrite < maxPiece {
		return info.MaxWrite
	}
	return maxPiece
}

// pieces is how many pieces a unit of size bytes takes (at least one).
func pieces(size, piece uint64) int {
	if size <= piece {
		return 1
	}
	return int((size + piece - 1) / piece)
}

// splitUnits makes c a split context when its largest unit (a shard, a
// page, a target's slice) of maxUnit bytes exceeds the piece size: each
// of its units ops becomes c.pp pieces.
func (w *worker) splitUnits(c *opCtx, units int, maxUnit uint64) {
	piece := w.doms[c.dom].piece
	if maxUnit <= piece {
		return
	}
	c.pp = pieces(maxUnit, piece)
	c.total = units * c.pp
}

// splitScatter sizes the pieces of a scatter context: only a source
// region longer than the piece size can hold a target that needs them.
func (w *worker) splitScatter(c *opCtx) {
	if c.src == nil || c.src.span.Len <= w.doms[c.dom].piece {
		return
	}
	var most uint64
	for i := range c.targets {
		size := c.targets[i].Length
		if c.nslices > 1 {
			_, size = byteSlice(size, c.nslices, c.slice)
		}
		most = max(most, size)
	}
	w.splitUnits(c, len(c.targets), most)
}

// fillSplit is fill for a split context: ops i0.. are pieces, c.pp per
// unit; unit u's piece p covers bytes [p*piece, (p+1)*piece) of the unit
// (pieces past a short unit's end are zero-byte writes, posted so that
// every unit has the same number of pieces). It stops at the window and,
// on an unordered domain, before a last piece whose earlier pieces are
// still in flight.
func (w *worker) fillSplit(c *opCtx, out []rdma.WriteOp) int {
	ds := w.doms[c.dom]
	piece := ds.piece
	// One piece per provider call (see above).
	k := max(0, min(c.total-c.next, len(out), 1, splitWindow-(c.next-c.finished)))
	for j := 0; j < k; j++ {
		i := c.next + j
		u, p := i/c.pp, i%c.pp
		last := p == c.pp-1
		if last && c.flags&rdma.WriteHasImm != 0 && !ds.info.OrderedWrites && (j > 0 || c.finished < c.next) {
			return j
		}
		var op rdma.WriteOp
		var size uint64
		if !w.fillUnit(c, u, &op, &size) {
			return j
		}
		off := uint64(p) * piece
		if off < size {
			op.Local += off
			op.Remote += off
			op.Length = min(piece, size-off)
		} else {
			op.Length = 0
		}
		if !last {
			op.Flags &^= rdma.WriteHasImm
			op.Imm = 0
		}
		out[j] = op
	}
	return k
}

// fillUnit builds the whole (unsplit) write of unit u of c into op and
// its length into size, as fill would. It returns false, with c marked
// bad, when the unit's peer cannot be written to.
func (w *worker) fillUnit(c *opCtx, u int, op *rdma.WriteOp, size *uint64) bool {
	switch c.kind {
	case reqSingle:
		*op = rdma.WriteOp{
			Local: c.localBase + c.srcOff, LocalDesc: c.localDesc,
			Remote: c.rbase + c.dstOff, RemoteKey: c.rkey, Peer: c.peer,
			Imm: c.imm, Flags: c.flags,
		}
		*size = c.length
	case reqPaged:
		*op = rdma.WriteOp{
			Local:     c.localBase + c.srcOff + c.srcStride*uint64(c.srcPages[u]),
			LocalDesc: c.localDesc,
			Remote:    c.rbase + c.dstOff + c.dstStride*uint64(c.dstPages[u]),
			RemoteKey: c.rkey, Peer: c.peer, Imm: c.imm, Flags: c.flags,
		}
		*size = c.length
	case reqScatter:
		var one [1]rdma.WriteOp
		next, total := c.next, c.total
		c.next, c.total = u, u+1
		n := w.fillWhole(c, one[:])
		c.next, c.total = next, total
		if n == 0 {
			return false
		}
		*op = one[0]
		*size = op.Length
	default:
		return false
	}
	return true
}
