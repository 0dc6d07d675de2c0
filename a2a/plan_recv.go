package a2a

// PlanRecv computes the receive records, the overflow and combine transfer
// lists and the immediate counts from the full count table: G rows of E
// routed counts, row h being group h's SendPlan.Counts. If PlanSend ran for
// this iteration, row Group(Rank) must equal its counts.
//
// The table comes from peers, so it is checked before any row index is
// derived from it: a count that no valid sender could produce is an
// ArgumentError, never an out-of-range row.
func (p *Planner) PlanRecv(table []uint32) error {
	const op = "plan recv"
	l := &p.l
	G, E, L, D, M := l.Groups, l.Experts, l.LocalExperts, l.ReplicaSize, int32(l.Private)
	r := l.Rank
	g := l.Group(r)
	if len(table) < G*E {
		return argErr(op, "table", "%d entries, need %d", len(table), G*E)
	}
	if p.sendOK {
		own := table[g*E : g*E+E]
		for e, c := range p.send.Counts {
			if own[e] != c {
				return argErr(op, "table", "row %d expert %d: %d, but this rank routed %d", g, e, own[e], c)
			}
		}
	}
	lo, hi := l.ExpertRange(r)
	maxLayout := int64(l.MaxTokens * l.ExpertsPerToken)
	var total int64
	for h := 0; h < G; h++ {
		row := table[h*E : h*E+hi]
		var before, mine int64
		for _, c := range row[:lo] {
			before += int64(c)
		}
		for _, c := range row[lo:] {
			mine += int64(c)
		}
		if mine > int64(l.MaxCopiesFrom) || before+mine > maxLayout {
			return argErr(op, "table", "group %d: %d copies for this rank after %d, beyond what %d tokens can route", h, mine, before, l.MaxTokens)
		}
		p.cnt[h], p.dgo[h] = int32(mine), int32(before)
		p.sgo[h] = int32(total)
		total += mine
	}

	rp := &p.recv
	// Local expert totals and their padded segments.
	pad := int32(l.ExpertPadding)
	var off int32
	for i := 0; i < L; i++ {
		var n int32
		if lo+i < hi {
			for h := 0; h < G; h++ {
				n += int32(table[h*E+lo+i])
			}
		}
		rp.TokensPerExpert[i] = n
		rp.ExpertOffsets[i] = off
		off += (n + pad - 1) / pad * pad
		p.running[i] = 0
	}
	rp.ExpertOffsets[L] = off

	// Records, group by group in visiting order.
	myNode := l.Node(r)
	GM := int32(G) * M
	rp.Records = rp.Records[:0]
	rp.NumRemote = 0
	expectDispatch := 0
	for _, h32 := range p.order {
		h := int(h32)
		s := h*D + l.Replica(r)
		remote := l.Node(s) != myNode
		if remote {
			expectDispatch++
			if p.cnt[h] > M {
				expectDispatch += l.NICsPerGPU
			}
		}
		var j int32
		for e := lo; e < hi; e++ {
			i := e - lo
			for c := table[h*E+e]; c > 0; c-- {
				rec := Record{Source: int32(s), Group: h32, Pos: p.dgo[h] + j, Padded: rp.ExpertOffsets[i] + p.running[i]}
				p.running[i]++
				switch {
				case s == r:
					rec.Kind, rec.SrcRow = SourceOwnSend, p.dgo[h]+j
				case j < M:
					rec.Kind, rec.SrcRow = SourceOwnRecv, h32*M+j
				case !remote:
					rec.Kind, rec.SrcRow = SourcePeerSend, p.dgo[h]+j
				default:
					rec.Kind, rec.SrcRow = SourceOwnRecv, GM+p.sgo[h]+j-M
				}
				if remote {
					rec.CombineRow = p.sgo[h] + j
				} else {
					rec.CombineRow = p.dgo[h] + j
				}
				rp.Records = append(rp.Records, rec)
				j++
			}
		}
		if remote {
			rp.NumRemote = len(rp.Records)
		}
	}

	// Overflow writes, as a sender: to each served rank q of another
	// domain that this group sends more than M copies, landing after the
	// overflow of the groups numbered below it.
	rp.Overflow = rp.Overflow[:0]
	own := table[g*E : g*E+E]
	var seg int32
	segAt := 0 // experts summed into seg so far
	for q := l.Replica(r); q < l.WorldSize; q += D {
		qlo, qhi := l.ExpertRange(q)
		for ; segAt < qlo; segAt++ {
			seg += int32(own[segAt])
		}
		if l.Node(q) == myNode {
			continue
		}
		var n int32
		for e := qlo; e < qhi; e++ {
			n += int32(own[e])
		}
		if n <= M {
			continue
		}
		var below int64
		for h := 0; h < g; h++ {
			var c int64
			for _, v := range table[h*E+qlo : h*E+qhi] {
				c += int64(v)
			}
			if c > int64(l.MaxCopiesFrom) {
				return argErr(op, "table", "group %d: %d copies for rank %d, beyond what %d tokens can route", h, c, q, l.MaxTokens)
			}
			below += c
		}
		rp.Overflow = append(rp.Overflow, Transfer{
			Peer: int32(q), NIC: -1, SrcRow: seg + M, DstRow: GM + int32(below), Rows: n - M,
		})
	}

	// Combine writes: the staged results of every other-domain group go to
	// all of its replicas.
	rp.Combine = rp.Combine[:0]
	for h := 0; h < G; h++ {
		if l.Node(h*D) == myNode {
			continue
		}
		for q := h * D; q < h*D+D; q++ {
			rp.Combine = append(rp.Combine, Transfer{
				Peer: int32(q), NIC: -1, SrcRow: p.sgo[h], DstRow: p.dgo[h], Rows: p.cnt[h],
			})
		}
	}

	nics := l.NICsPerGPU
	W, S := l.WorldSize, l.NVLinkSize
	rp.Imm[TagRoute] = Count{Sent: len(p.send.Routes), Expected: G - 1}
	// One eager write per group of another domain (see SendPlan.Eager).
	rp.Imm[TagDispatch] = Count{Sent: G - l.GroupsPerNode + len(rp.Overflow)*nics, Expected: expectDispatch}
	rp.Imm[TagCombine] = Count{Sent: len(rp.Combine) * nics, Expected: (W - S) * nics}
	rp.Imm[TagDispatchBarrier] = Count{Sent: W - 1, Expected: W - 1}
	rp.Imm[TagCombineBarrier] = Count{Sent: W - 1, Expected: W - 1}
	return nil
}
