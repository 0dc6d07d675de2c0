package a2a

// PlanRecv computes the receive runs, the combine transfer list and the
// immediate counts from the full count table: G rows of
// Layout.RowWords words, row h being group h's SendPlan.Row. If PlanSend
// ran for this iteration, row Group(Rank) must equal its row.
//
// The table comes from peers, so everything a row index is derived from is
// checked first: a count or segment start that no valid sender could
// produce is an ArgumentError, never an out-of-range row.
func (p *Planner) PlanRecv(table []uint32) error {
	const op = "plan recv"
	l := &p.l
	G, E, L, D, M := l.Groups, l.Experts, l.LocalExperts, l.ReplicaSize, int32(l.Private)
	RW, r := l.RowWords, l.Rank
	g := l.Group(r)
	if len(table) < G*RW {
		return argErr(op, "table", "%d words, need %d", len(table), G*RW)
	}
	if p.sendOK {
		for i, v := range p.send.Row {
			if table[g*RW+i] != v {
				return argErr(op, "table", "row %d word %d: %d, but this rank computed %d", g, i, table[g*RW+i], v)
			}
		}
	}
	lo, hi := l.ExpertRange(r)
	maxLayout := int64(l.MaxTokens * l.ExpertsPerToken)
	var total int64
	for h := 0; h < G; h++ {
		row := table[h*RW : h*RW+RW]
		seg := row[E:]
		mine := sum(row[lo:hi])
		before := int64(seg[r])
		if mine > int64(l.MaxCopiesFrom) || before+mine > maxLayout || int64(seg[r+1])-before != mine {
			return argErr(op, "table", "group %d: %d copies for this rank at %d (next segment at %d), impossible for %d tokens",
				h, mine, before, seg[r+1], l.MaxTokens)
		}
		p.cnt[h], p.dgo[h] = int32(mine), int32(before)
		p.sgo[h] = int32(total)
		total += mine
	}

	rp := &p.recv
	pad := int32(l.ExpertPadding)
	var off int32
	for i := 0; i < L; i++ {
		var n int32
		if lo+i < hi {
			for h := 0; h < G; h++ {
				n += int32(table[h*RW+lo+i])
			}
		}
		rp.TokensPerExpert[i] = n
		rp.ExpertOffsets[i] = off
		off += (n + pad - 1) / pad * pad
		p.running[i] = 0
	}
	rp.ExpertOffsets[L] = off

	// Runs, group by group in visiting order; at most two per (group,
	// expert): for a node group, the pushed private part and the pulled
	// rest.
	myNode := l.Node(r)
	win := int32(l.MaxCopiesFrom)
	runs := rp.Runs[:0]
	rp.RemoteRuns, rp.RemoteCopies = 0, 0
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
			c := int32(table[h*RW+e])
			for c > 0 {
				// Written in place: appending a struct literal costs a
				// stack copy per run.
				runs = runs[:len(runs)+1]
				run := &runs[len(runs)-1]
				run.Source, run.Group, run.Expert, run.Pos = int32(s), h32, int32(i), p.dgo[h]+j
				run.Padded, run.Count = rp.ExpertOffsets[i]+p.running[i], c
				switch {
				case s == r:
					run.Kind, run.SrcRow = SourceOwnSend, p.dgo[h]+j
				case remote:
					// Private part and overflow share the group's window.
					run.Kind, run.SrcRow = SourceOwnRecv, h32*win+j
				case j < M:
					run.Kind, run.SrcRow = SourceOwnRecv, h32*win+j
					run.Count = min(c, M-j)
				default:
					run.Kind, run.SrcRow = SourcePeerSend, p.dgo[h]+j
				}
				if remote {
					run.CombineRow = p.sgo[h] + j
				} else {
					run.CombineRow = p.dgo[h] + j
				}
				p.running[i] += run.Count
				j += run.Count
				c -= run.Count
			}
		}
		if remote {
			rp.RemoteRuns = len(runs)
		}
	}
	rp.Runs = runs
	rp.Copies = int(total)
	rp.RemoteCopies = 0
	for _, run := range runs[:rp.RemoteRuns] {
		rp.RemoteCopies += int(run.Count)
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
	// One eager write per group of another domain, plus n slices per
	// served rank this group sends more than M copies (SendPlan.Overflow).
	sent := G - l.GroupsPerNode
	ownSeg := table[g*RW+E : g*RW+RW]
	for q := l.Replica(r); q < W; q += D {
		if l.Node(q) != myNode && int64(ownSeg[q+1])-int64(ownSeg[q]) > int64(M) {
			sent += nics
		}
	}
	rp.Imm[TagDispatch] = Count{Sent: sent, Expected: expectDispatch}
	rp.Imm[TagCombine] = Count{Sent: len(rp.Combine) * nics, Expected: (W - S) * nics}
	rp.Imm[TagDispatchBarrier] = Count{Sent: W - 1, Expected: W - 1}
	rp.Imm[TagCombineBarrier] = Count{Sent: W - 1, Expected: W - 1}
	rp.Imm[TagNodeDispatch] = Count{Sent: S - 1, Expected: S - 1}
	rp.Imm[TagNodeCombine] = Count{Sent: S - 1, Expected: S - 1}
	return nil
}
