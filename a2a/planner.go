package a2a

// Planner computes, for one rank, everything dispatch and combine need to
// know about where rows go: the sender's expert-sorted layout, the path of
// every copy and the eager and overflow writes (PlanSend, from this rank's
// own routing alone), then, once the routed counts of every group are
// known, the receive runs, the combine writes and the immediate counts
// (PlanRecv).
//
// All memory is allocated by NewPlanner for the Layout's maxima and reused:
// steady-state planning allocates nothing. A Planner is not safe for
// concurrent use; the slices its plans expose stay valid until the next call
// that replans them.
type Planner struct {
	l    Layout
	send SendPlan
	recv RecvPlan

	ordinal []int32  // per copy: index among the copies of its expert
	stamp   []uint64 // per expert: last token that used it, for duplicates
	stampAt uint64
	sendOK  bool
	owner   []int32 // per expert: owning rank (saves a division per copy)
	// kind of each destination rank as seen from this one, so classifying
	// a copy costs a table lookup instead of three divisions.
	destKind []uint8

	// The active ranks (SetActive), the expert ranges of the inactive
	// ones, and how many active ranks are in other domains.
	members      Members
	dropped      [][2]int32
	remoteActive int

	// Receive-side scratch, all of fixed size.
	order   []int32 // groups in visiting order (fixed per rank)
	cnt     []int32 // G: copies each group sends this rank
	sgo     []int32 // G: exclusive prefix of cnt over groups in numeric order
	dgo     []int32 // G: start of this rank's segment in each group's layout
	running []int32 // L: copies placed so far per local expert
}

// SendPlan is the sender's side of one dispatch, computed by PlanSend.
// Copies are numbered i = t*K + k.
//
// Per copy the plan stores only the expert and its ordinal; position, path
// and destination row follow from small per-expert tables in O(1) (Copy).
// That halves the planner's per-copy work, and the pack loop, which visits
// every copy anyway, pays a few loads instead.
type SendPlan struct {
	Tokens int // m
	// Row is what the count exchange sends: Layout.RowWords words, the E
	// per-expert counts (Counts) followed by the W+1 starts of each rank's
	// segment in the layout (Segments). Carrying the segment starts lets a
	// receiver find its segment in every group's layout without summing
	// the counts of all experts before its own (O(G*L) instead of O(G*E)).
	Row      []uint32
	Counts   []uint32
	Segments []uint32
	// Offsets is the exclusive prefix of Counts (E+1 entries): expert e's
	// copies occupy layout rows [Offsets[e], Offsets[e+1]). Copies of one
	// expert are in token-major order (t, then k), so the layout is
	// deterministic (the reference assigned ordinals with atomics).
	Offsets []int32
	// Expert and Ordinal give, per copy, its expert (a copy of the indices)
	// and its index among that expert's copies.
	Expert  []uint32
	Ordinal []int32
	// Routes are the ranks this rank sends its count row to: every active
	// rank of another group that it serves (Members; with every rank
	// active, the replica with its own replica index in every other group).
	Routes []int32
	// Eager lists one write per rank of another domain that this rank
	// serves (Members.Eager), in rank order, zero-row writes included:
	// the first min(count, M) rows of its segment into the private window.
	// Targets are sharded over NICs by peer (Transfer.NIC).
	Eager []Transfer
	// Overflow lists one write per served rank of another domain that gets
	// more than M copies: the rest of the segment, into the rest of the
	// window. Each is split by bytes across all NICs (Transfer.NIC -1).
	Overflow []Transfer
	// Dropped counts the copies routed to the experts of inactive ranks
	// (PathDropped): they stay in the layout and the count row, but no
	// row moves and combine adds nothing for them.
	Dropped int

	// Per expert: owner rank, the ordinal below which copies take the
	// private path, the paths below and from that ordinal, and the private
	// row of ordinal 0 in the owner's receive buffer.
	owner    []int32
	split    []int32
	low      []Path
	high     []Path
	pushBase []int32
}

// CopyPlan is where one copy goes.
type CopyPlan struct {
	Pos  int32 // row in the expert-sorted layout (= send buffer row when staged)
	Dest int32 // rank that owns the copy's expert
	// PushRow is, for PathNodePush, the row in Dest's receive buffer.
	PushRow int32
	Path    Path
}

// Copy returns the plan of copy i (0 <= i < Tokens*K).
func (s *SendPlan) Copy(i int) CopyPlan {
	e, o := s.Expert[i], s.Ordinal[i]
	c := CopyPlan{Pos: s.Offsets[e] + o, Dest: s.owner[e], Path: s.high[e]}
	if o < s.split[e] {
		c.Path, c.PushRow = s.low[e], s.pushBase[e]+o
	}
	return c
}

// RecvPlan is the receiver's side of one dispatch and everything combine
// needs, computed by PlanRecv from the full count table.
type RecvPlan struct {
	// TokensPerExpert has L entries: copies received per local expert (0
	// for experts past E on the last ranks).
	TokensPerExpert []int32
	// ExpertOffsets has L+1 entries: local expert i's segment of the
	// dispatch output starts at row ExpertOffsets[i], a multiple of the
	// padding; ExpertOffsets[L] is the padded total.
	ExpertOffsets []int32
	// Runs lists every copy this rank receives (see Run). Groups come in a
	// fixed visiting order: groups of other domains (domain by domain,
	// starting after this rank's, wrapping), then the other groups of this
	// domain (starting after its own, wrapping), then its own group; within
	// a group, local experts ascending, copies in the sender's token-major
	// order. The first RemoteRuns runs come from other domains, so a
	// backend can copy everything else while RDMA data still lands.
	Runs       []Run
	RemoteRuns int
	// Copies is the number of copies in Runs; RemoteCopies of them come
	// from other domains.
	Copies, RemoteCopies int
	// Combine lists this rank's combine writes: for every group of another
	// domain and every replica in it, the staged rows of that group's
	// copies, into the replica's receive buffer at the rows where its
	// tokens' results belong. Zero-row writes included; split by bytes
	// across all NICs.
	Combine []Transfer
	// Imm gives, per tag, the immediates this rank sends and the number it
	// must wait for (see the package documentation for the arithmetic).
	Imm [NumTags]Count
}

// NewPlanner validates cfg and allocates a planner for its maxima.
func NewPlanner(cfg Config) (*Planner, error) {
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	W, E, G, L := l.WorldSize, l.Experts, l.Groups, l.LocalExperts
	copies := l.MaxTokens * l.ExpertsPerToken
	p := &Planner{
		l:       l,
		ordinal: make([]int32, copies),
		stamp:   make([]uint64, E),
		order:   make([]int32, 0, G),
		cnt:     make([]int32, G),
		sgo:     make([]int32, G),
		dgo:     make([]int32, G),
		running: make([]int32, L),
	}
	p.owner = make([]int32, E)
	for e := range p.owner {
		p.owner[e] = int32(l.Owner(e))
	}
	p.destKind = make([]uint8, W)
	p.members = Members{
		Active:  make([]bool, W),
		Others:  make([]int32, 0, W),
		Node:    make([]int32, 0, l.NVLinkSize),
		Routes:  make([]int32, 0, W),
		Eager:   make([]int32, 0, W),
		Combine: make([]int32, 0, W),
		Serves:  make([]bool, W),
		Sources: make([]int32, G),
	}
	p.dropped = make([][2]int32, 0, W)
	p.send = SendPlan{
		Row:      make([]uint32, l.RowWords),
		Offsets:  make([]int32, E+1),
		Expert:   make([]uint32, copies),
		Ordinal:  p.ordinal,
		Eager:    make([]Transfer, 0, W),
		Overflow: make([]Transfer, 0, W),
		owner:    p.owner,
		split:    make([]int32, E),
		low:      make([]Path, E),
		high:     make([]Path, E),
		pushBase: make([]int32, E),
	}
	p.send.Counts = p.send.Row[:E]
	p.send.Segments = p.send.Row[E:]
	p.recv = RecvPlan{
		TokensPerExpert: make([]int32, L),
		ExpertOffsets:   make([]int32, L+1),
		Runs:            make([]Run, 0, 2*G*L),
		Combine:         make([]Transfer, 0, W),
	}
	all := make([]bool, W)
	for q := range all {
		all[q] = true
	}
	if err := p.SetActive(all); err != nil {
		return nil, err
	}
	r := l.Rank
	// Visiting order of source groups (see RecvPlan.Runs).
	P, n, g := l.GroupsPerNode, l.Node(r), l.Group(r)
	for dn := 1; dn < l.Nodes; dn++ {
		base := ((n + dn) % l.Nodes) * P
		for h := base; h < base+P; h++ {
			p.order = append(p.order, int32(h))
		}
	}
	base := n * P
	for dg := 1; dg < P; dg++ {
		p.order = append(p.order, int32(base+(g-base+dg)%P))
	}
	p.order = append(p.order, int32(g))
	return p, nil
}

// Layout returns the planner's validated layout.
func (p *Planner) Layout() *Layout { return &p.l }

// Send returns the plan of the last successful PlanSend.
func (p *Planner) Send() *SendPlan { return &p.send }

// Recv returns the plan of the last successful PlanRecv.
func (p *Planner) Recv() *RecvPlan { return &p.recv }

const (
	destSelf uint8 = iota
	destReplica
	destNode
	destRemote
	destDropped
)

// sum adds v with four independent accumulators: the planner's prefix sums
// over the count table are its largest loop, and one dependency chain
// would make them latency-bound.
func sum(v []uint32) int64 {
	var a, b, c, d int64
	for len(v) >= 4 {
		a += int64(v[0])
		b += int64(v[1])
		c += int64(v[2])
		d += int64(v[3])
		v = v[4:]
	}
	for _, x := range v {
		a += int64(x)
	}
	return a + b + c + d
}

// shardPeer returns the NIC of target i of t when targets are split into
// contiguous blocks, one block per NIC (the engine's peer sharding).
func shardPeer(i, t, nics int) int32 {
	block := ceilDiv(t, nics)
	if block == 0 {
		return 0
	}
	return int32(i / block)
}

// ShardBytes returns slice i of n bytes split across nics NICs: equal
// slices, the remainder going to the last one. Empty slices are still
// posted, because the receiver counts one immediate per slice.
func ShardBytes(n int64, nics, i int) (off, length int64) {
	each := n / int64(nics)
	off = each * int64(i)
	if i == nics-1 {
		return off, n - off
	}
	return off, each
}
