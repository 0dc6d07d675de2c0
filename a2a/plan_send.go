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
	// E-sized array per call.
	for t := 0; t < m; t++ {
		p.stampAt++
		for k, e := range idx[t*K : t*K+K] {
			if e >= uint32(E) {
				return argErr(op, "indices", "token %d slot %d: expert %d >= %d", t, k, e, E)
			}
			if p.stamp[e] == p.stampAt {
				return argErr(op, "indices", "token %d routes to expert %d twice", t, e)
			}
			p.stamp[e] = p.stampAt
			p.ordinal[t*K+k] = int32(s.Counts[e])
			s.Counts[e]++
		}
	}
	var sum int32
	for e, c := range s.Counts {
		s.Offsets[e] = sum
		sum += int32(c)
	}
	s.Offsets[E] = sum
	for q := range p.seg {
		p.seg[q] = s.Offsets[min(q*L, E)]
	}

	r, M := l.Rank, int32(l.Private)
	myNode, myRep := l.Node(r), l.Replica(r)
	h := int32(l.Group(r))
	for i, e := range idx {
		q := int(e) / L
		pos := s.Offsets[e] + p.ordinal[i]
		j := pos - p.seg[q]
		s.Pos[i], s.Dest[i] = pos, int32(q)
		var path Path
		switch {
		case q == r:
			path = PathSelf
		case l.Replica(q) != myRep:
			path = PathReplica
		case l.Node(q) == myNode && j < M:
			path = PathNodePush
			s.PushRow[i] = h*M + j
		case l.Node(q) == myNode:
			path = PathNodePull
		case j < M:
			path = PathEager
		default:
			path = PathOverflow
		}
		s.Path[i] = path
	}

	// One eager write per served rank of another domain, so each receiver
	// gets exactly one per remote group. The reference let every replica
	// post it, leaving D-1 surplus immediates per group in the counter.
	s.Eager = s.Eager[:0]
	for q := myRep; q < l.WorldSize; q += l.ReplicaSize {
		if l.Node(q) == myNode {
			continue
		}
		rows := min(p.seg[q+1]-p.seg[q], M)
		s.Eager = append(s.Eager, Transfer{Peer: int32(q), SrcRow: p.seg[q], DstRow: h * M, Rows: rows})
	}
	for i := range s.Eager {
		s.Eager[i].NIC = shardPeer(i, len(s.Eager), l.NICsPerGPU)
	}
	s.Tokens = m
	p.sendOK = true
	return nil
}
