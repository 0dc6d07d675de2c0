package a2a

// PlanSend computes the sender's layout for m tokens routed by indices
// (m rows of K expert ids, row-major, packed). Expert ids must be below E
// and the K ids of a token must differ: the buffer sizes rely on it. m may
// be 0: the plan is then empty but complete (every eager write is still
// posted, with zero rows), so the protocol runs its usual steps; the
// reference hung on zero tokens.
func (p *Planner) PlanSend(indices []uint32, m int) error {
	const op = "plan send"
	l := &p.l
	K, E, L := l.ExpertsPerToken, l.Experts, l.LocalExperts
	p.sendOK = false
	if m < 0 || m > l.MaxTokens {
		return argErr(op, "tokens", "%d not in [0, %d]", m, l.MaxTokens)
	}
	if len(indices) < m*K {
		return argErr(op, "indices", "%d entries for %d tokens of %d", len(indices), m, K)
	}
	s := &p.send
	clear(s.Counts)
	idx := indices[:m*K]
	// Stamps make the duplicate check O(K) per token without clearing an
	// E-sized array per call. The slices are held in locals: the compiler
	// would otherwise reload them from p after every store.
	counts, stamp, ord := s.Counts[:E], p.stamp[:E], p.ordinal[:len(idx)]
	at := p.stampAt
	for t := 0; t < m; t++ {
		at++
		row := idx[t*K : t*K+K]
		for k, e := range row {
			if e >= uint32(E) {
				return argErr(op, "indices", "token %d slot %d: expert %d >= %d", t, k, e, E)
			}
			if stamp[e] == at {
				return argErr(op, "indices", "token %d routes to expert %d twice", t, e)
			}
			stamp[e] = at
			ord[t*K+k] = int32(counts[e])
			counts[e]++
		}
	}
	p.stampAt = at
	var sum int32
	for e, c := range s.Counts {
		s.Offsets[e] = sum
		sum += int32(c)
	}
	s.Offsets[E] = sum
	seg := s.Segments
	for q := range seg {
		seg[q] = uint32(s.Offsets[min(q*L, E)])
	}

	r, M, win := l.Rank, int32(l.Private), int32(l.MaxCopiesFrom)
	h := int32(l.Group(r))
	// Per expert e with owner q: its copies have j = Offsets[e]-seg[q] +
	// ordinal, so those with ordinal < M - (Offsets[e]-seg[q]) are private.
	for e := range s.split {
		q := p.owner[e]
		j0 := s.Offsets[e] - int32(seg[q])
		s.split[e] = max(M-j0, 0)
		s.pushBase[e] = h*win + j0
		switch p.destKind[q] {
		case destSelf:
			s.low[e], s.high[e] = PathSelf, PathSelf
		case destReplica:
			s.low[e], s.high[e] = PathReplica, PathReplica
		case destNode:
			s.low[e], s.high[e] = PathNodePush, PathNodePull
		case destDropped:
			s.low[e], s.high[e] = PathDropped, PathDropped
		default:
			s.low[e], s.high[e] = PathEager, PathOverflow
		}
	}
	s.Expert = s.Expert[:m*K]
	copy(s.Expert, idx)
	s.Dropped = 0
	for _, d := range p.dropped {
		s.Dropped += int(s.Offsets[d[1]] - s.Offsets[d[0]])
	}

	s.Eager, s.Overflow = p.SendTransfers(seg, s.Eager[:0], s.Overflow[:0])
	s.Tokens = m
	p.sendOK = true
	return nil
}

// SendTransfers appends to eager and overflow the RDMA writes of this
// rank's dispatch, given the W+1 segment starts of its layout (the tail
// of its count row, SendPlan.Segments): one eager write per rank of
// another domain it serves (Members.Eager), in rank order, zero rows
// included, sharded over the NICs by peer; and for each such rank that
// gets more than M copies, one overflow write of the rest, split by
// bytes. It is what PlanSend lists, for backends whose kernels lay the
// copies out and write the row (the CPU then knows the segments without
// the indices).
func (p *Planner) SendTransfers(seg []uint32, eager, overflow []Transfer) ([]Transfer, []Transfer) {
	l := &p.l
	M, win := int32(l.Private), int32(l.MaxCopiesFrom)
	h := int32(l.Group(l.Rank))
	first := len(eager)
	// One eager write per served rank of another domain, so each receiver
	// gets exactly one per remote group. The reference let every replica
	// post it, leaving D-1 surplus immediates per group in the counter.
	for _, q := range p.members.Eager {
		n := int32(seg[q+1] - seg[q])
		eager = append(eager, Transfer{Peer: q, SrcRow: int32(seg[q]), DstRow: h * win, Rows: min(n, M)})
		if n > M {
			overflow = append(overflow, Transfer{Peer: q, NIC: -1, SrcRow: int32(seg[q]) + M, DstRow: h*win + M, Rows: n - M})
		}
	}
	mine := eager[first:]
	for i := range mine {
		mine[i].NIC = shardPeer(i, len(mine), l.NICsPerGPU)
	}
	return eager, overflow
}
