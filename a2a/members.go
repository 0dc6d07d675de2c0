package a2a

import "context"

// Exchanger all-gathers one message per rank, in rank order
// (rendezvous.Group does). Backends publish their descriptors with it;
// a membership change that brings a restarted rank back all-gathers over
// the members only (Membership.Exchange).
type Exchanger interface {
	AllGather(ctx context.Context, data []byte) ([][]byte, error)
}

// Membership says which ranks take part in the iterations from a
// generation on: see Context.SetActiveRanks.
type Membership struct {
	// Generation numbers the membership changes of a world. Every Context
	// starts in generation 0 with every rank active; each change takes a
	// larger number than the one before, the same on every member, whose
	// bank (Generation mod ImmBanks) differs from the current one's.
	Generation uint32
	// Active has WorldSize entries: Active[q] says whether rank q takes
	// part. The calling rank must be active.
	Active []bool
	// Exchange, when set, re-publishes every member's descriptors: an
	// all-gather over the members only (the active ranks, in rank order).
	// Every member passes one, or none does. It is required when a member
	// is a restarted process (a backend built to join, see
	// MembershipBackend.Joining), whose buffers and addresses are new.
	Exchange Exchanger
}

// MembershipBackend is a Backend that can run with some ranks inactive.
// Context.SetActiveRanks calls Quiesce, then sets the planner to the new
// members, then SetActive.
type MembershipBackend interface {
	Backend
	// Quiesce abandons whatever the current generation left unfinished:
	// nothing of the backend reads the planner or posts anything once it
	// returns, and every transfer it posted has finished (those to a lost
	// rank fail). Every wait ends with ctx.
	Quiesce(ctx context.Context) error
	// SetActive brings this rank into m with the other members: it takes
	// m's bank of immediate values, rewires its targets and watches to the
	// active ranks, and meets every other member twice (everyone quiet,
	// then everyone reset) before it returns. p already plans for m. Every
	// wait ends with ctx.
	SetActive(ctx context.Context, p *Planner, m *Membership) error
	// Joining reports that the backend was built to join a running world
	// (it exchanged nothing yet): its Context accepts SetActiveRanks, with
	// an Exchange, before any iteration.
	Joining() bool
}

// Members is a planner's view of the active ranks (SetActive), from which
// backends build the target lists that stay fixed between membership
// changes. Rank lists are ascending.
//
// Group h serves rank q through the active replica of h whose replica
// index is q's, or, when that one is inactive, the next active one in
// replica order (wrapping): exactly one rank of every group with an
// active replica (a live group) sends q its count row and its copies.
type Members struct {
	Active []bool  // per rank
	Count  int     // active ranks
	Live   int     // live groups (with an active replica): Live-1 count rows arrive per iteration
	Others []int32 // every other active rank (barrier signals)
	Node   []int32 // the other active ranks of this rank's domain (node signals)
	// Routes are the ranks of other groups this rank serves: where its
	// count row goes (SendPlan.Routes).
	Routes []int32
	// Eager are the ranks of other domains this rank serves, the peers of
	// SendPlan.Eager in its order.
	Eager []int32
	// Combine are the peers of RecvPlan.Combine in its order: every active
	// replica of every live group of another domain, by group, then rank.
	Combine []int32
	// Serves[q] says whether this rank stages or pushes the rows bound for
	// rank q: q is this rank, or an active rank this rank serves.
	Serves []bool
	// Sources[h] is the rank of group h that serves this rank, or -1 when
	// group h has no active replica (its tokens are absent).
	Sources []int32
}

// Members returns the planner's view of the active ranks.
func (p *Planner) Members() *Members { return &p.members }

// Active reports whether rank q takes part in the current membership.
func (p *Planner) Active(q int) bool { return p.members.Active[q] }

// server returns the rank of group h that serves rank q, or -1.
func (p *Planner) server(h, q int) int32 {
	D := p.l.ReplicaSize
	for i := 0; i < D; i++ {
		s := h*D + (p.l.Replica(q)+i)%D
		if p.members.Active[s] {
			return int32(s)
		}
	}
	return -1
}

// CheckActive checks a set of active ranks for this rank: WorldSize
// entries, this rank's among the active.
func (l *Layout) CheckActive(active []bool) error {
	const op = "set active ranks"
	if len(active) != l.WorldSize {
		return argErr(op, "Active", "%d entries for %d ranks", len(active), l.WorldSize)
	}
	if !active[l.Rank] {
		return argErr(op, "Active", "rank %d (this one) is not active", l.Rank)
	}
	return nil
}

// SetActive makes the planner plan for the ranks in active (WorldSize
// entries, this rank's among them): copies routed to the experts of an
// inactive rank are dropped (PathDropped), groups without an active
// replica send nothing, and every list and immediate count covers the
// active ranks only. It invalidates the last PlanSend.
func (p *Planner) SetActive(active []bool) error {
	l := &p.l
	W, r, D := l.WorldSize, l.Rank, l.ReplicaSize
	if err := l.CheckActive(active); err != nil {
		return err
	}
	m := &p.members
	copy(m.Active, active)
	p.sendOK = false
	m.Count = 0
	m.Others, m.Node, m.Routes, m.Eager, m.Combine = m.Others[:0], m.Node[:0], m.Routes[:0], m.Eager[:0], m.Combine[:0]
	p.dropped = p.dropped[:0]
	p.remoteActive = 0
	g, myNode := l.Group(r), l.Node(r)
	for q := 0; q < W; q++ {
		if !active[q] {
			p.destKind[q] = destDropped
			m.Serves[q] = false
			if lo, hi := l.ExpertRange(q); lo < hi {
				p.dropped = append(p.dropped, [2]int32{int32(lo), int32(hi)})
			}
			continue
		}
		m.Count++
		if l.Node(q) != myNode {
			p.remoteActive++
		}
		serves := q == r || p.server(g, q) == int32(r)
		m.Serves[q] = serves
		switch {
		case q == r:
			p.destKind[q] = destSelf
			continue
		case !serves:
			p.destKind[q] = destReplica
		case l.Node(q) == myNode:
			p.destKind[q] = destNode
		default:
			p.destKind[q] = destRemote
			m.Eager = append(m.Eager, int32(q))
		}
		m.Others = append(m.Others, int32(q))
		if l.Node(q) == myNode {
			m.Node = append(m.Node, int32(q))
		}
		if serves && l.Group(q) != g {
			m.Routes = append(m.Routes, int32(q))
		}
	}
	m.Live = 0
	for h := 0; h < l.Groups; h++ {
		m.Sources[h] = p.server(h, r)
		if m.Sources[h] >= 0 {
			m.Live++
		}
		if m.Sources[h] < 0 || l.Node(h*D) == myNode {
			continue
		}
		for q := h * D; q < h*D+D; q++ {
			if active[q] {
				m.Combine = append(m.Combine, int32(q))
			}
		}
	}
	p.send.Routes = m.Routes
	return nil
}
