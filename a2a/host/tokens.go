package host

import (
	"encoding/binary"
	"fmt"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/rows"
)

// Shared tokens (see wire's tokens.go). Where this rank stores its rows
// straight into a receiver's buffer (a node peer's receive buffer, or one
// the transport lends), it stores each of its tokens bound for that
// receiver once, in the free rows of its window there (past its copies'
// rows), and in each copy's slot the 4-byte number of the row holding
// the token: top-K routing sends a token to several experts of one rank,
// so the rows written shrink by about that factor, and the receiver
// reads each token's row from memory once (the later copies of it hit
// the cache).

// shared is a rank's shared-token state.
type shared struct {
	to    []bool   // per rank: this iteration's copies for it hold references
	next  []int32  // per rank: the next free row of this rank's window in its buffer
	seen  []uint32 // per rank and token: the iteration the token got a row
	row   []int32  // per rank and token: that row
	iter  uint32
	from  []int8 // per rank, this call: 1 its copies hold references, -1 not, 0 not asked yet
	count []int32
	refs  uint64 // copies sent as references, since New
	// cached says this iteration's token rows go with cached stores
	// (rows.PackCached): their receivers read them within the phase,
	// from the shared cache, while every rank on the host stores that
	// many rows fits in half of it (cacheBudget, rows.SharedCacheBytes);
	// else they are streamed to memory as every other row.
	cached      bool
	cacheBudget int
	// Iterations since New whose token rows went with cached stores, and
	// streamed (those with any).
	cachedIters, streamedIters uint64
}

func (b *Backend) initShared() {
	W, T := b.l.WorldSize, b.l.MaxTokens
	b.sh = shared{to: make([]bool, W), next: make([]int32, W), seen: make([]uint32, W*T), row: make([]int32, W*T),
		from: make([]int8, W), count: make([]int32, W), cacheBudget: rows.SharedCacheBytes() / 2}
}

// bump starts a new mark for seen.
func (sh *shared) bump() {
	if sh.iter++; sh.iter == 0 {
		clear(sh.seen)
		sh.iter = 1
	}
}

// tokenDest is the buffer this rank stores copies for rank q into, when
// it stores them straight into q's memory (node peers and lent buffers),
// else nil.
func (b *Backend) tokenDest(q int32) []byte {
	if b.l.Node(int(q)) == b.l.Node(b.l.Rank) {
		return b.recv[b.peer(q)]
	}
	return b.direct[q]
}

// shareTokens decides, per receiver, whether this iteration's copies for
// it hold references: where its rows go straight into its memory and its
// window has room for its copies and its distinct tokens. Call after
// b.direct is set, before any row is packed and before the signals.
func (b *Backend) shareTokens(p *a2a.Planner, sp *a2a.SendPlan) {
	l, K, T := &b.l, b.l.ExpertsPerToken, b.l.MaxTokens
	sh := &b.sh
	clear(sh.to)
	clear(sh.count)
	sh.bump()
	// Distinct tokens per receiver.
	for i := range sp.Tokens * K {
		c := sp.Copy(i)
		if c.Path != a2a.PathEager && c.Path != a2a.PathOverflow && c.Path != a2a.PathNodePush && c.Path != a2a.PathNodePull {
			continue
		}
		if k := int(c.Dest)*T + i/K; sh.seen[k] != sh.iter {
			sh.seen[k] = sh.iter
			sh.count[c.Dest]++
		}
	}
	sh.bump() // seen marks again below, as rows are assigned
	window := int32(l.Group(l.Rank) * l.MaxCopiesFrom)
	host, tokenRows := 1, 0 // ranks whose memory this rank stores into, itself included; token rows stored
	for q := range l.WorldSize {
		if q == l.Rank || !p.Active(q) || b.tokenDest(int32(q)) == nil {
			continue
		}
		host++
		if sh.count[q] == 0 {
			continue
		}
		n := int32(sp.Segments[q+1] - sp.Segments[q])
		if n+sh.count[q] > int32(l.MaxCopiesFrom) {
			continue
		}
		if sh.to[q] = b.wire.ShareTokens(q); sh.to[q] {
			sh.next[q] = window + n
			tokenRows += int(sh.count[q])
		}
	}
	sh.cached = tokenRows*l.DispatchRow*host <= sh.cacheBudget
	switch {
	case tokenRows == 0:
	case sh.cached:
		sh.cachedIters++
	default:
		sh.streamedIters++
	}
}

// pack stores token t of in for the copy whose slot is slot, bound for
// rank q: the row itself, or the number of the row holding the token in
// q's buffer (stored there at the token's first copy).
func (b *Backend) pack(q int32, slot []byte, in *a2a.DispatchInput, t int) {
	sh := &b.sh
	if !sh.to[q] {
		rows.Pack(&b.l, slot, in, t)
		return
	}
	k := int(q)*b.l.MaxTokens + t
	if sh.seen[k] != sh.iter {
		sh.seen[k], sh.row[k] = sh.iter, sh.next[q]
		sh.next[q]++
		if sh.cached {
			rows.PackCached(&b.l, b.drow(b.tokenDest(q), sh.row[k]), in, t)
		} else {
			rows.Pack(&b.l, b.drow(b.tokenDest(q), sh.row[k]), in, t)
		}
	}
	binary.LittleEndian.PutUint32(slot, uint32(sh.row[k]))
	sh.refs++
}

// sharesFrom says whether rank q's copies of this iteration hold
// references (asked once per call; resetShared forgets).
func (b *Backend) sharesFrom(q int32) bool {
	if b.sh.from[q] == 0 {
		b.sh.from[q] = -1
		if b.wire.SharesTokens(int(q)) {
			b.sh.from[q] = 1
		}
	}
	return b.sh.from[q] == 1
}

func (b *Backend) resetShared() { clear(b.sh.from) }

// unpackShared copies run's copies, whose slots in buf hold references,
// from the token rows in this rank's receive buffer into out.
func (b *Backend) unpackShared(run *a2a.Run, buf []byte, out *a2a.DispatchOutput) error {
	l := &b.l
	lo := int32(l.Group(int(run.Source)) * l.MaxCopiesFrom)
	hi := lo + int32(l.MaxCopiesFrom)
	recv := b.recv[b.me]
	for c := int32(0); c < run.Count; c++ {
		r := int32(binary.LittleEndian.Uint32(b.drow(buf, run.SrcRow+c)))
		if r < lo || r >= hi {
			return fmt.Errorf("a2a host: rank %d's copy at row %d refers to row %d, outside its window [%d, %d): %w",
				run.Source, run.SrcRow+c, r, lo, hi, a2a.ErrInvalidArgument)
		}
		rows.Unpack(l, out, int(run.Padded+c), b.drow(recv, r))
	}
	return nil
}
