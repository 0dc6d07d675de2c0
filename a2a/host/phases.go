package host

import (
	"context"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/rows"
)

// drow returns dispatch row r of a transport buffer, crow combine row r:
// each phase lays its rows at its own stride (a2a.Layout.PhaseStride).
func (b *Backend) drow(buf []byte, r int32) []byte {
	s := b.l.DispatchRow
	return buf[int(r)*s : int(r+1)*s]
}

func (b *Backend) crow(buf []byte, r int32) []byte {
	s := b.l.CombineRow
	return buf[int(r)*s : int(r+1)*s]
}

// peer returns the node-local index of rank q (a node peer).
func (b *Backend) peer(q int32) int { return int(q) - b.base }

// bound limits a call's waits to the backend's timeout.
func (b *Backend) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.timeout)
}

func (b *Backend) DispatchSend(ctx context.Context, p *a2a.Planner, in *a2a.DispatchInput) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	// The previous combine barrier frees every buffer this phase writes.
	if err := b.w.await(ctx, b.w.txReady, "the previous iteration's barrier", func() error {
		return b.wire.Barrier(ctx, a2a.TagCombineBarrier)
	}); err != nil {
		return err
	}
	b.wire.BeginIteration()
	l, sp := &b.l, p.Send()
	RW, g := l.RowWords, l.Group(l.Rank)
	copy(b.words[g*RW:(g+1)*RW], sp.Row)
	// Counts first: receivers need them before anything else.
	if err := b.wire.Routes(); err != nil {
		return err
	}
	K, own := l.ExpertsPerToken, b.send[b.me]
	// Copies that stay on this rank are not staged: DispatchRecv copies
	// them straight from in (the caller leaves it unchanged until then),
	// so they are copied once. selfTok maps their layout row (past this
	// rank's own segment start) to their token.
	b.din = in
	selfBase := int32(sp.Segments[l.Rank])
	// Rows for other domains first: their writes go out while this rank
	// stages the rest, so the fabric's copy overlaps this rank's own.
	// A peer whose receive buffer the transport lends (ipc) gets its rows
	// stored there at once, at the rows its writes would fill (the group's
	// window: row h*W + j), and writes of zero rows for the immediates.
	defer b.wire.ReleaseDirect()
	b.eagerT = append(b.eagerT[:0], sp.Eager...)
	b.overT = append(b.overT[:0], sp.Overflow...)
	clear(b.direct)
	for i := range b.eagerT {
		if b.direct[b.eagerT[i].Peer] = b.wire.Direct(b.eagerT[i].Peer); b.direct[b.eagerT[i].Peer] != nil {
			b.eagerT[i].Rows = 0
		}
	}
	for i := range b.overT {
		if b.direct[b.overT[i].Peer] != nil {
			b.overT[i].Rows = 0
		}
	}
	b.shareTokens(p, sp)
	window := int32(l.Group(l.Rank) * l.MaxCopiesFrom)
	for i := range sp.Tokens * K {
		if c := sp.Copy(i); c.Path == a2a.PathEager || c.Path == a2a.PathOverflow {
			if dst := b.direct[c.Dest]; dst != nil {
				b.pack(c.Dest, b.drow(dst, window+c.Pos-int32(sp.Segments[c.Dest])), in, i/K)
			} else {
				rows.Pack(l, b.drow(own, c.Pos), in, i/K)
			}
		}
	}
	// The rows are streamed unfenced (rows.Copy): one fence orders them
	// all before the writes and signals that publish them.
	rows.Fence()
	if err := b.wire.Dispatch(b.eagerT, b.overT); err != nil {
		return err
	}
	for i := range sp.Tokens * K {
		switch c := sp.Copy(i); c.Path {
		case a2a.PathSelf:
			b.selfTok[c.Pos-selfBase] = int32(i / K)
		case a2a.PathNodePull:
			b.pack(c.Dest, b.drow(own, c.Pos), in, i/K)
		case a2a.PathNodePush:
			b.pack(c.Dest, b.drow(b.recv[b.peer(c.Dest)], c.PushRow), in, i/K)
		}
	}
	rows.Fence()
	if err := b.wire.Signal(a2a.TagNodeDispatch); err != nil {
		return err
	}
	b.w.p = p
	b.w.hand(stepPlan)
	return nil
}

func (b *Backend) DispatchRecv(ctx context.Context, p *a2a.Planner, out *a2a.DispatchOutput) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	l := &b.l
	if err := b.w.await(ctx, b.w.planned, "the count exchange", func() error { return b.plan(ctx, p) }); err != nil {
		return err
	}
	rp := p.Recv()
	in, selfBase := b.din, int32(p.Send().Segments[l.Rank])
	b.din = nil
	b.resetShared()
	// copyRuns copies the runs of runs whose source is (own) or is not
	// this rank itself.
	copyRuns := func(runs []a2a.Run, own bool) error {
		for i := range runs {
			run := &runs[i]
			if (run.Kind == a2a.SourceOwnSend) != own {
				continue
			}
			buf := b.recv[b.me]
			switch run.Kind {
			case a2a.SourceOwnSend:
				// SrcRow is the copy's row in this rank's own layout.
				for c := int32(0); c < run.Count; c++ {
					rows.Direct(l, out, int(run.Padded+c), in, int(b.selfTok[run.SrcRow+c-selfBase]))
				}
				continue
			case a2a.SourcePeerSend:
				buf = b.send[b.peer(run.Source)]
			}
			if b.sharesFrom(run.Source) {
				if err := b.unpackShared(run, buf, out); err != nil {
					return err
				}
				continue
			}
			for c := int32(0); c < run.Count; c++ {
				rows.Unpack(l, out, int(run.Padded+c), b.drow(buf, run.SrcRow+c))
			}
		}
		return nil
	}
	// This rank's own copies first: they need no peer, and node peers
	// may still be storing their rows meanwhile. Then the node peers'
	// rows, while RDMA rows may still be landing.
	node := rp.Runs[rp.RemoteRuns:]
	if err := copyRuns(node, true); err != nil {
		return err
	}
	if err := b.wire.Wait(ctx, a2a.TagNodeDispatch, rp.Imm[a2a.TagNodeDispatch].Expected); err != nil {
		return err
	}
	if err := copyRuns(node, false); err != nil {
		return err
	}
	if err := b.wire.Wait(ctx, a2a.TagDispatch, rp.Imm[a2a.TagDispatch].Expected); err != nil {
		return err
	}
	if err := copyRuns(rp.Runs[:rp.RemoteRuns], false); err != nil {
		return err
	}
	// The caller may hand out's rows to another thread next.
	rows.Fence()
	copy(out.ExpertTokens, rp.TokensPerExpert)
	if out.ExpertOffsets != nil {
		copy(out.ExpertOffsets, rp.ExpertOffsets)
	}
	b.w.hand(stepDispatchBarrier)
	return nil
}

func (b *Backend) CombineSend(ctx context.Context, p *a2a.Planner, in *a2a.CombineInput) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	// The dispatch barrier: every rank is done reading what it was sent,
	// and every transfer out of the send buffer completed.
	if err := b.w.await(ctx, b.w.txReady, "the dispatch barrier", func() error {
		return b.wire.Barrier(ctx, a2a.TagDispatchBarrier)
	}); err != nil {
		return err
	}
	l, rp := &b.l, p.Recv()
	own := b.send[b.me]
	// Results for a replica whose receive buffer the transport lends (ipc)
	// are stored there at once, at the rows its write would fill, and its
	// write carries zero rows; the others' are staged once per run.
	defer b.wire.ReleaseDirect()
	b.combT = append(b.combT[:0], rp.Combine...)
	for i := range b.combT {
		if b.cdst[i] = b.wire.Direct(b.combT[i].Peer); b.cdst[i] != nil {
			b.combT[i].Rows = 0
		}
	}
	for _, run := range rp.Runs[:rp.RemoteRuns] {
		staged := false
		for i := range rp.Combine {
			t := &rp.Combine[i]
			if int32(l.Group(int(t.Peer))) != run.Group {
				continue
			}
			dst, at := b.cdst[i], t.DstRow+run.CombineRow-t.SrcRow
			if dst == nil {
				if staged {
					continue
				}
				staged, dst, at = true, own, run.CombineRow
			}
			for c := int32(0); c < run.Count; c++ {
				rows.Copy(b.crow(dst, at+c), rows.ExpertRow(l, in, run.Padded+c))
			}
		}
	}
	rows.Fence()
	if err := b.wire.Combine(b.combT); err != nil {
		return err
	}
	// This rank's own tokens' results are not copied: CombineRecv reads
	// them from in (left unchanged until it returns), through selfPad:
	// their row in this rank's layout (past its own segment start) to the
	// expert-output row holding them.
	b.cin = in
	D, g := int32(l.ReplicaSize), int32(l.Group(l.Rank))
	selfBase := int32(p.Send().Segments[l.Rank])
	for _, run := range rp.Runs[rp.RemoteRuns:] {
		if run.Group == g {
			for c := int32(0); c < run.Count; c++ {
				b.selfPad[run.CombineRow+c-selfBase] = run.Padded + c
			}
		}
		for q := run.Group * D; q < run.Group*D+D; q++ {
			if !p.Active(int(q)) || int(q) == l.Rank {
				continue
			}
			dst := b.recv[b.peer(q)]
			for c := int32(0); c < run.Count; c++ {
				rows.Copy(b.crow(dst, run.CombineRow+c), rows.ExpertRow(l, in, run.Padded+c))
			}
		}
	}
	rows.Fence()
	return b.wire.Signal(a2a.TagNodeCombine)
}

func (b *Backend) CombineRecv(ctx context.Context, p *a2a.Planner, out *a2a.CombineOutput) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	if err := b.wire.Wait(ctx, a2a.TagNodeCombine, p.Recv().Imm[a2a.TagNodeCombine].Expected); err != nil {
		return err
	}
	if err := b.wire.Wait(ctx, a2a.TagCombine, p.Recv().Imm[a2a.TagCombine].Expected); err != nil {
		return err
	}
	sp := p.Send()
	b.selfLo, b.selfHi = int32(sp.Segments[b.l.Rank]), int32(sp.Segments[b.l.Rank+1])
	b.reduce.Reduce(sp, out, b.combineRow)
	b.cin = nil
	b.w.hand(stepCombineBarrier)
	return nil
}

// resultRow returns the combine result of the copy at row pos of this
// rank's layout: its own expert output for a copy that stayed on this
// rank (CombineSend's input), else the row peers stored or wrote into
// the receive buffer. Bound once at New as combineRow, so Reduce gets
// the same func value every call and nothing is allocated.
func (b *Backend) resultRow(pos int32) []byte {
	if pos >= b.selfLo && pos < b.selfHi {
		return rows.ExpertRow(&b.l, b.cin, b.selfPad[pos-b.selfLo])
	}
	return b.crow(b.recv[b.me], pos)
}
