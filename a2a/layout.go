package a2a

// Layout is a validated Config plus everything derived from it: topology
// arithmetic, the private window, row formats and buffer sizes. It is plain
// data, safe to copy and to share between goroutines.
type Layout struct {
	Config // normalized: defaults filled in

	Groups        int // G = W/D: distinct token sources
	Nodes         int // W/S: NVLink domains
	GroupsPerNode int // S/D
	LocalExperts  int // L = ceil(E/W); the last ranks may own fewer (or none)
	Private       int // M actually used: the default or the request, at most MaxCopiesFrom

	TokenBytes int // H * size(DispatchType): bytes of one token
	ScaleBytes int // Hs * 4
	// DispatchRow is the stride of dispatch rows in the transport buffers
	// (token and scales, each padded to 16 bytes), so a dispatch write of
	// n rows carries n*DispatchRow bytes.
	DispatchRow  int
	CombineBytes int // H * size(CombineType): bytes of one expert output row
	// CombineRow is the stride of combine rows, CombineBytes padded to 16.
	CombineRow int
	// MaxCopiesFrom is the most copies one group can send one rank,
	// T*min(K, L), and the size of each group's window in a receive buffer.
	MaxCopiesFrom int

	// SendRows and RecvRows are the row capacities of the two transport
	// buffers (each row Stride() bytes of room); SendBytes and
	// RecvBytes are their sizes rounded to 4 KiB.
	SendRows, RecvRows   int
	SendBytes, RecvBytes int64
	// OutputRows is the smallest row count a dispatch output (and the
	// matching expert output of combine) may have: it holds every padded
	// local-expert segment in the worst case, or, in the batched layout
	// (MaxTokensPerExpert B > 0), exactly L*B rows.
	OutputRows int
	// RowWords is the length in uint32 words of one row of the count table
	// (SendPlan.Row: E counts, then W+1 segment starts); CountTableBytes is
	// the size of the G-row table the count exchange fills.
	RowWords        int
	CountTableBytes int
}

// Layout validates c and derives its Layout. The error is a *ConfigError.
func (c Config) Layout() (Layout, error) {
	c = c.normalized()
	if err := c.check(); err != nil {
		return Layout{}, err
	}
	W, S, D, T, E, K := c.WorldSize, c.NVLinkSize, c.ReplicaSize, c.MaxTokens, c.Experts, c.ExpertsPerToken
	l := Layout{Config: c}
	l.Groups = W / D
	l.Nodes = W / S
	l.GroupsPerNode = S / D
	l.LocalExperts = ceilDiv(E, W)
	L, G := l.LocalExperts, l.Groups

	// The K experts of a token differ (PlanSend enforces it), so one token
	// sends a rank at most min(K, L) copies. The reference's sizing relied on
	// this without checking it.
	l.MaxCopiesFrom = T * min(K, L)
	switch {
	case c.PrivateTokens == NoPrivateWindow:
		l.Private = 0
	case c.PrivateTokens == 0:
		l.Private = ceilDiv(T*K, E) * privateNumerator / privateDenominato * L
	default:
		l.Private = c.PrivateTokens
	}
	// A window larger than what one group can ever send only wastes rows.
	l.Private = min(l.Private, l.MaxCopiesFrom)

	l.TokenBytes = c.Hidden * c.DispatchType.Size()
	l.ScaleBytes = c.Scales * 4
	// Rows are padded to 16 bytes for vector copies, but only the real bytes
	// are ever read from or written to caller memory, so any H works (the
	// reference over-read and over-wrote when H*size was not a multiple of
	// 16). Scales have their own 16-byte aligned slot after the token.
	l.DispatchRow = roundUp(l.TokenBytes, rowAlign) + roundUp(l.ScaleBytes, rowAlign)
	l.CombineBytes = c.Hidden * c.CombineType.Size()
	l.CombineRow = roundUp(l.CombineBytes, rowAlign)

	// Receive buffer: in dispatch, one window of T*min(K,L) rows per
	// source group (its first M rows are the private part); in combine, the
	// results for this rank's own copies at their expert-sorted positions
	// (T*K rows). The reference sized it by the dispatch bound only, which
	// is smaller when G*min(K,L) < K.
	recv := max(int64(G)*int64(l.MaxCopiesFrom), int64(T)*int64(K))
	// Send buffer: the expert-sorted copies of this rank's tokens (T*K
	// rows), later the combine results staged for remote groups (at most
	// everything received). The reference sized both by the receive bound,
	// which is smaller than T*K when G*L < K.
	send := max(int64(T)*int64(K), int64(G)*int64(l.MaxCopiesFrom))
	// Dispatch output: each local expert's segment rounds up to the
	// padding; with at most G*T*min(K,L) copies in all that is at most
	// L*(pad-1) extra rows. The reference bounded it by
	// min(T*G*K + L*(pad-1), T*G*L), which is too small when every local
	// expert receives a count that is not a multiple of the padding.
	out := int64(G)*int64(l.MaxCopiesFrom) + int64(L)*int64(c.ExpertPadding-1)
	out = int64(roundUp(int(min(out, maxRows)), c.ExpertPadding))
	if c.MaxTokensPerExpert > 0 {
		// Batched: a fixed block of B rows per local expert.
		out = int64(L) * int64(c.MaxTokensPerExpert)
	}
	stride := int64(max(l.DispatchRow, l.CombineRow))
	for _, v := range []struct {
		field string
		rows  int64
	}{{"receive rows", recv}, {"send rows", send}, {"output rows", out}} {
		if v.rows > maxRows || v.rows*stride > maxBufferBytes {
			return Layout{}, cfgErr("MaxTokens", int64(T), "%s %d of %d bytes exceed the limits (2^31 rows, 2^40 bytes)", v.field, v.rows, stride)
		}
	}
	l.RecvRows, l.SendRows, l.OutputRows = int(recv), int(send), int(out)
	l.RecvBytes = int64(roundUp(int(recv*stride), bufferAlign))
	l.SendBytes = int64(roundUp(int(send*stride), bufferAlign))
	l.RowWords = E + W + 1
	l.CountTableBytes = G * l.RowWords * 4
	return l, nil
}

// Stride is the row capacity of both transport buffers: each holds its row
// count times Stride bytes, so either phase fits. The rows themselves sit
// at their own phase's stride (DispatchRow in dispatch, CombineRow in
// combine), so writes carry no padding up to the other phase's row size.
func (l *Layout) Stride() int { return max(l.DispatchRow, l.CombineRow) }

// PhaseStride returns the row stride of the transport buffers in the
// phase that tag t belongs to: CombineRow for TagCombine and
// TagNodeCombine, DispatchRow otherwise.
func (l *Layout) PhaseStride(t Tag) int {
	if t == TagCombine || t == TagNodeCombine {
		return l.CombineRow
	}
	return l.DispatchRow
}

// Group returns the replica group of rank r (its token source).
func (l *Layout) Group(r int) int { return r / l.ReplicaSize }

// Replica returns r's index inside its replica group.
func (l *Layout) Replica(r int) int { return r % l.ReplicaSize }

// Node returns r's NVLink domain.
func (l *Layout) Node(r int) int { return r / l.NVLinkSize }

// Owner returns the rank that owns expert e.
func (l *Layout) Owner(e int) int { return e / l.LocalExperts }

// ExpertRange returns the experts [lo, hi) rank r owns (empty when E is not
// a multiple of W and r is among the last ranks).
func (l *Layout) ExpertRange(r int) (lo, hi int) {
	lo = min(r*l.LocalExperts, l.Experts)
	hi = min(lo+l.LocalExperts, l.Experts)
	return lo, hi
}

// Tag names one of the immediate values a context uses.
type Tag uint8

const (
	TagRoute           Tag = iota // count exchange writes
	TagDispatch                   // eager and overflow dispatch writes
	TagCombine                    // combine writes
	TagDispatchBarrier            // barrier after dispatch receive
	TagCombineBarrier             // barrier after combine receive
	TagNodeDispatch               // node peer's dispatch rows (pushed or staged) are ready
	TagNodeCombine                // node peer's combine rows are pushed
	TagJoin                       // a member is past a phase of a membership change
)

// NumTags is the number of tags, the immediate values of one bank.
const NumTags = int(TagJoin) + 1

// ImmBanks is the number of banks of immediate values a context cycles
// through, one per membership generation (Context.SetActiveRanks): an
// immediate left over from an older generation (a late write of a lost
// rank, a slow completion) carries another bank's value, so no counter of
// the current generation counts it. A bank comes back after ImmBanks
// generations: a straggler would have to outlive that many membership
// changes, each of which waits for every member's transfers, to be
// counted.
const ImmBanks = 64

// Imm returns the immediate value of tag t in membership generation gen:
// bank gen mod ImmBanks of the NumTags*ImmBanks values from ImmBase.
func (l *Layout) Imm(t Tag, gen uint32) uint32 {
	return l.ImmBase + uint32(NumTags)*(gen%ImmBanks) + uint32(t)
}

func (t Tag) String() string {
	switch t {
	case TagRoute:
		return "route"
	case TagDispatch:
		return "dispatch"
	case TagCombine:
		return "combine"
	case TagDispatchBarrier:
		return "dispatch-barrier"
	case TagCombineBarrier:
		return "combine-barrier"
	case TagNodeDispatch:
		return "node-dispatch"
	case TagNodeCombine:
		return "node-combine"
	case TagJoin:
		return "join"
	}
	return "tag(?)"
}
