package wire

import (
	"sync/atomic"

	"github.com/ferryrdma/ferry/a2a"
)

// Traffic is what one tag's writes asked the engine to move.
type Traffic = a2a.Traffic

// tagTraffic accumulates a tag's Traffic. The poster adds, anyone may read:
// the CUDA backend posts from its worker goroutine.
type tagTraffic struct {
	bytes, rows atomic.Uint64
}

func (t *tagTraffic) add(bytes, rows uint64) {
	t.bytes.Add(bytes)
	t.rows.Add(rows)
}

// Traffic returns what tag's writes moved since the wiring was built
// (TagRoute, TagDispatch and TagCombine count; other tags are
// zero-byte signals). Safe to call from any goroutine.
func (w *Wiring) Traffic(tag a2a.Tag) Traffic {
	t := &w.traffic[tag]
	return Traffic{Bytes: t.bytes.Load(), Rows: t.rows.Load()}
}
