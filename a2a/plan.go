package a2a

// Path is how one copy (token t, top-k slot k) travels from its sender to
// the rank that owns its expert. With q the owner, h the sender's group and
// j the copy's index among everything h sends q (the expert-sorted order):
type Path uint8

const (
	_ Path = iota // the zero Path is no path
	// PathSelf: q is the sender. The row is staged in the sender's own send
	// buffer, where its own dispatch receive reads it.
	PathSelf
	// PathNodePush: q shares the sender's NVLink domain and j < M. The
	// sender stores the row straight into its window in q's receive buffer
	// (row h*W+j, W = Layout.MaxCopiesFrom).
	PathNodePush
	// PathNodePull: same domain, j >= M. The row is staged in the sender's
	// send buffer; q reads it from there through its mapping.
	PathNodePull
	// PathEager: q is in another domain and j < M. Staged, then written
	// over RDMA into the private part of the sender's window in q's receive
	// buffer (row h*W+j), one write per receiver, sharded over NICs by peer.
	PathEager
	// PathOverflow: another domain, j >= M. Staged, then written over RDMA
	// into the rest of the window (row h*W+j), one write per receiver split
	// by bytes over all NICs. The window is static, so the sender needs no
	// other group's counts: the write goes out with the eager one, and only
	// the receiver waits for the count exchange (the reference placed
	// overflow by the counts of lower groups, which cost senders a count
	// round trip before they could post it).
	PathOverflow
	// PathReplica: another replica of the sender's group serves q (the one
	// whose replica index equals q's, see Members); this rank does nothing
	// with the copy.
	PathReplica
	// PathDropped: q is not active (Planner.SetActive). The copy is not
	// sent, no output row holds it, and combine adds nothing for it (its
	// slot counts as if its weight were zero).
	PathDropped
)

func (p Path) String() string {
	switch p {
	case PathSelf:
		return "self"
	case PathNodePush:
		return "node-push"
	case PathNodePull:
		return "node-pull"
	case PathEager:
		return "rdma-eager"
	case PathOverflow:
		return "rdma-overflow"
	case PathReplica:
		return "replica"
	case PathDropped:
		return "dropped"
	}
	return "none"
}

// Staged reports whether the sender copies a row on path p into its own
// send buffer at the copy's position.
func (p Path) Staged() bool {
	return p == PathSelf || p == PathNodePull || p == PathEager || p == PathOverflow
}

// Transfer is one RDMA write of consecutive rows from this rank's send
// buffer into a peer's receive buffer. Rows may be 0: the write is still
// posted, because the receiver counts its immediate.
type Transfer struct {
	Peer   int32 // destination rank
	NIC    int32 // NIC index for peer-sharded lists; -1 when split across all NICs by bytes
	SrcRow int32 // first row in this rank's send buffer
	DstRow int32 // first row in the peer's receive buffer
	Rows   int32
}

// Source says where dispatch receive finds a record's row.
type Source uint8

const (
	_ Source = iota // the zero Source is none
	// SourceOwnSend: this rank's own send buffer (the copy is its own).
	SourceOwnSend
	// SourceOwnRecv: this rank's receive buffer (pushed, eager or overflow).
	SourceOwnRecv
	// SourcePeerSend: the send buffer of node peer Run.Source (pull).
	SourcePeerSend
)

// Run is a set of consecutive copies this rank receives from one group for
// one local expert that travel the same way: copy c of the run (0 <= c <
// Count) is read from row SrcRow+c of the buffer Kind names, is the copy at
// row Pos+c of its sender's layout, lands in dispatch output row Padded+c
// and sends its expert output to row CombineRow+c. Decode batches make runs
// of a few copies, prefill batches runs of hundreds, so describing them as
// runs keeps the planner's cost proportional to G*L instead of to the
// copies, and lets host backends copy runs with one bounds check.
type Run struct {
	Source int32 // sending rank: the replica of Group whose index matches this rank's
	Group  int32 // source group h
	Expert int32 // local expert index i (global r*L + i)
	SrcRow int32
	Pos    int32
	Padded int32
	// CombineRow: for a run from another domain, a staging row of this
	// rank's send buffer (shipped by the combine transfers); otherwise the
	// row in the receive buffer of every replica of Group (a node store),
	// which equals Pos.
	CombineRow int32
	Count      int32
	Kind       Source
}

// Count is an immediate-count summary of one tag: how many immediates this
// rank sends with it and how many it must wait for.
type Count struct {
	Sent, Expected int
}
