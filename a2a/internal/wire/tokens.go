package wire

// Shared tokens. A token goes to several experts of one rank (top-K over
// few ranks), so where a sender stores its rows straight into a
// receiver's buffer (a node peer's, or one the transport lends), it may
// store each token once, in the free rows of its window there, and in
// each copy's slot only the row holding its token (a 4-byte reference):
// the receiver then copies every copy from the token's one row. The
// sender says so per receiver and iteration (ShareTokens, before its
// signals), the receiver asks (SharesTokens); a rank that did not is read
// row by row as before.

// lineRefs word 0: the stamp of the iteration whose copies from the
// line's sender hold references.
const refsStamp = 0

// ShareTokens tells rank q that this iteration's copies for it hold
// references to token rows; false when q's table is not lent (the caller
// stores the rows themselves then).
func (w *Wiring) ShareTokens(q int) bool {
	if !w.ringing() {
		return false
	}
	b, m := w.peerTable(q)
	if b == nil {
		return false
	}
	word(b, senderLine(w.l, w.l.Rank, lineRefs)+refsStamp*8).Store(w.stamp())
	m.Release()
	return true
}

// SharesTokens says whether rank q's copies of this iteration hold
// references to token rows.
func (w *Wiring) SharesTokens(q int) bool {
	return w.ringing() && word(w.bell.own, senderLine(w.l, q, lineRefs)+refsStamp*8).Load() == w.stamp()
}
