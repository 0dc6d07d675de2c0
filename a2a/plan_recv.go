package a2a

import "fmt"

// PlanRecv computes the receive runs, the combine transfer list and the
// immediate counts from the full count table: G rows of
// Layout.RowWords words, row h being group h's SendPlan.Row. If PlanSend
// ran for this iteration, row Group(Rank) must equal its row.
//
// The table comes from peers, so everything a row index is derived from is
// checked first: a count or segment start that no valid sender could
// produce is an ArgumentError, never an out-of-range row. Rows of groups
// with no active replica are neither read nor checked: nobody wrote them
// in this generation.
func (p *Planner) PlanRecv(table []uint32) error {
	const op = "plan recv"
	l := &p.l
	G, E, L, M := l.Groups, l.Experts, l.LocalExperts, int32(l.Private)
	RW, r := l.RowWords, l.Rank
	src := p.members.Sources
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
		p.sgo[h] = int32(total)
		if src[h] < 0 {
			p.cnt[h], p.dgo[h] = 0, 0
			continue
		}
		row := table[h*RW : h*RW+RW]
		seg := row[E:]
		mine := sum(row[lo:hi])
		before := int64(seg[r])
		if mine > int64(l.MaxCopiesFrom) || before+mine > maxLayout || int64(seg[r+1])-before != mine {
			return argErr(op, "table", "group %d: %d copies for this rank at %d (next segment at %d), impossible for %d tokens",
				h, mine, before, seg[r+1], l.MaxTokens)
		}
		p.cnt[h], p.dgo[h] = int32(mine), int32(before)
		total += mine
	}

	if l.MaxTokensPerExpert > 0 {
		if err := p.checkBatched(table); err != nil {
			return err
		}
	}
	rp := &p.recv
	pad := int32(l.ExpertPadding)
	var off int32
	for i := 0; i < L; i++ {
		var n int32
		if lo+i < hi {
			for h := 0; h < G; h++ {
				if src[h] >= 0 {
					n += int32(table[h*RW+lo+i])
				}
			}
		}
		rp.TokensPerExpert[i] = n
		rp.ExpertOffsets[i] = off
		if b := int32(l.MaxTokensPerExpert); b > 0 {
			off += b
		} else {
			off += (n + pad - 1) / pad * pad
		}
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
		s := int(src[h])
		if s < 0 {
			continue
		}
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

	// Combine writes: the staged results of every live other-domain group
	// go to all of its active replicas (Members.Combine).
	rp.Combine = rp.Combine[:0]
	mb := &p.members
	for _, q := range mb.Combine {
		h := l.Group(int(q))
		rp.Combine = append(rp.Combine, Transfer{Peer: q, NIC: -1, SrcRow: p.sgo[h], DstRow: p.dgo[h], Rows: p.cnt[h]})
	}

	nics := l.NICsPerGPU
	rp.Imm[TagRoute] = Count{Sent: len(mb.Routes), Expected: mb.Live - 1}
	// One eager write per served rank of another domain, plus n slices per
	// such rank this group sends more than M copies (SendPlan.Overflow).
	sent := len(mb.Eager)
	ownSeg := table[g*RW+E : g*RW+RW]
	for _, q := range mb.Eager {
		if int64(ownSeg[q+1])-int64(ownSeg[q]) > int64(M) {
			sent += nics
		}
	}
	others := mb.Count - 1
	rp.Imm[TagDispatch] = Count{Sent: sent, Expected: expectDispatch}
	rp.Imm[TagCombine] = Count{Sent: len(rp.Combine) * nics, Expected: p.remoteActive * nics}
	rp.Imm[TagDispatchBarrier] = Count{Sent: others, Expected: others}
	rp.Imm[TagCombineBarrier] = Count{Sent: others, Expected: others}
	rp.Imm[TagNodeDispatch] = Count{Sent: len(mb.Node), Expected: len(mb.Node)}
	rp.Imm[TagNodeCombine] = Count{Sent: len(mb.Node), Expected: len(mb.Node)}
	rp.Imm[TagJoin] = Count{Sent: others, Expected: others}
	return nil
}

// checkBatched fails the iteration with ErrExpertOverflow when any expert
// of an active rank gets more copies than the batched layout's bound. It
// checks every expert of the world, not only this rank's: each rank holds
// the whole count table, so all of them fail the same iteration at the
// same step, and none waits for a rank that gave up.
func (p *Planner) checkBatched(table []uint32) error {
	l := &p.l
	G, E, RW := l.Groups, l.Experts, l.RowWords
	b := uint64(l.MaxTokensPerExpert)
	src, active := p.members.Sources, p.members.Active
	for e := 0; e < E; e++ {
		if !active[l.Owner(e)] {
			continue
		}
		var n uint64
		for h := 0; h < G; h++ {
			if src[h] >= 0 {
				n += uint64(table[h*RW+e])
			}
		}
		if n > b {
			return fmt.Errorf("a2a plan recv: expert %d (rank %d) got %d copies, max tokens per expert %d: %w",
				e, l.Owner(e), n, b, ErrExpertOverflow)
		}
	}
	return nil
}
