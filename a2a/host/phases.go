package host

import (
	"context"
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/rows"
	"github.com/ferryrdma/ferry/fabric"
)

// closeDrain bounds how long Close waits for transfers still in flight.
const closeDrain = 5 * time.Second

func (b *Backend) row(buf []byte, r int32) []byte {
	s := b.l.Stride()
	return buf[int(r)*s : int(r+1)*s]
}

// peer returns the node-local index of rank q (a node peer).
func (b *Backend) peer(q int32) int { return int(q) - b.base }

func (b *Backend) scatter(targets []fabric.ScatterTarget, src *fabric.MemoryRegion, tag a2a.Tag, route fabric.ScatterRouting, g fabric.PeerGroup) error {
	if len(targets) == 0 {
		return nil
	}
	w := fabric.ScatterWrite{Src: src, Targets: targets, Imm: b.l.Imm(tag), HasImm: true, Route: route, Group: g}
	if err := b.eng.SubmitScatter(w, fabric.Count(&b.done)); err != nil {
		return fmt.Errorf("a2a host %v scatter: %w", tag, err)
	}
	b.posted++
	return nil
}

// signal sends one zero-byte immediate of tag to each of dsts.
func (b *Backend) signal(dsts []fabric.Descriptor, tag a2a.Tag) error {
	if len(dsts) == 0 {
		return nil
	}
	if err := b.eng.SubmitBarrier(fabric.Barrier{Imm: b.l.Imm(tag), Dsts: dsts}, fabric.Count(&b.done)); err != nil {
		return fmt.Errorf("a2a host %v signal: %w", tag, err)
	}
	b.posted++
	return nil
}

// wait takes n immediates of tag, early arrivals included.
func (b *Backend) wait(ctx context.Context, tag a2a.Tag, n int) error {
	if n == 0 {
		return nil
	}
	if err := b.counters[tag].Wait(ctx, int64(n)); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("a2a host rank %d: waiting for %d %v immediates: %w: %w", b.l.Rank, n, tag, a2a.ErrTimeout, err)
		}
		return fmt.Errorf("a2a host rank %d: waiting for %v immediates: %w", b.l.Rank, tag, err)
	}
	return nil
}

// drain waits until every transfer posted so far completed, so the
// buffers they read may be reused, and reports any that failed.
func (b *Backend) drain(ctx context.Context) error {
	if err := b.done.Wait(ctx, b.posted); err != nil {
		return fmt.Errorf("a2a host rank %d: %d of %d transfers completed: %w: %w", b.l.Rank, b.done.Done(), b.posted, a2a.ErrTimeout, err)
	}
	if n := b.done.Errors(); n > 0 {
		return fmt.Errorf("a2a host rank %d: %d transfers failed: %w", b.l.Rank, n, fabric.ErrProvider)
	}
	return nil
}

// barrier: every transfer of this phase is complete here and every rank
// is past the phase's reads, so all buffers may be reused.
func (b *Backend) barrier(ctx context.Context, tag a2a.Tag) error {
	if err := b.signal(b.allDsts, tag); err != nil {
		return err
	}
	if err := b.wait(ctx, tag, b.l.WorldSize-1); err != nil {
		return err
	}
	return b.drain(ctx)
}

func (b *Backend) DispatchSend(ctx context.Context, p *a2a.Planner, in *a2a.DispatchInput) error {
	// The previous combine barrier frees every buffer this phase writes.
	if err := await(ctx, b.w.txReady, "the previous iteration's barrier"); err != nil {
		return err
	}
	l, sp := &b.l, p.Send()
	RW, g := l.RowWords, l.Group(l.Rank)
	copy(b.words[g*RW:(g+1)*RW], sp.Row)
	b.routeT = b.routeT[:0]
	for _, q := range sp.Routes {
		off := uint64(g * RW * 4)
		b.routeT = append(b.routeT, fabric.ScatterTarget{Dst: b.tableDesc[q], Length: uint64(RW * 4), SrcOffset: off, DstOffset: off})
	}
	// Counts first: receivers need them before anything else.
	if err := b.scatter(b.routeT, b.tableReg, a2a.TagRoute, fabric.ShardPeers(), b.routeG); err != nil {
		return err
	}
	K, own := l.ExpertsPerToken, b.send[b.me]
	for i := range sp.Tokens * K {
		c := sp.Copy(i)
		switch {
		case c.Path.Staged():
			rows.Pack(l, b.row(own, c.Pos), in, i/K)
		case c.Path == a2a.PathNodePush:
			rows.Pack(l, b.row(b.recv[b.peer(c.Dest)], c.PushRow), in, i/K)
		}
	}
	if err := b.signal(b.nodeDsts, a2a.TagNodeDispatch); err != nil {
		return err
	}
	stride := uint64(l.Stride())
	b.eagerT = b.eagerT[:0]
	for _, t := range sp.Eager {
		b.eagerT = append(b.eagerT, fabric.ScatterTarget{Dst: b.recvDesc[t.Peer], Length: uint64(t.Rows) * stride,
			SrcOffset: uint64(t.SrcRow) * stride, DstOffset: uint64(t.DstRow) * stride})
	}
	if err := b.scatter(b.eagerT, b.sendReg, a2a.TagDispatch, fabric.ShardPeers(), b.eagerG); err != nil {
		return err
	}
	if err := b.postOverflow(sp); err != nil {
		return err
	}
	b.w.p = p
	b.w.steps <- stepPlan
	return nil
}

// postOverflow posts the overflow rows PlanSend listed.
func (b *Backend) postOverflow(sp *a2a.SendPlan) error {
	stride := uint64(b.l.Stride())
	b.overT = b.overT[:0]
	for _, t := range sp.Overflow {
		b.overT = append(b.overT, fabric.ScatterTarget{Dst: b.recvDesc[t.Peer], Length: uint64(t.Rows) * stride,
			SrcOffset: uint64(t.SrcRow) * stride, DstOffset: uint64(t.DstRow) * stride})
	}
	return b.scatter(b.overT, b.sendReg, a2a.TagDispatch, fabric.ShardBytes(), fabric.PeerGroup{})
}

func (b *Backend) DispatchRecv(ctx context.Context, p *a2a.Planner, out *a2a.DispatchOutput) error {
	l := &b.l
	if err := await(ctx, b.w.planned, "the count exchange"); err != nil {
		return err
	}
	rp := p.Recv()
	copyRuns := func(runs []a2a.Run) {
		for i := range runs {
			run := &runs[i]
			buf := b.recv[b.me]
			switch run.Kind {
			case a2a.SourceOwnSend:
				buf = b.send[b.me]
			case a2a.SourcePeerSend:
				buf = b.send[b.peer(run.Source)]
			}
			for c := int32(0); c < run.Count; c++ {
				rows.Unpack(l, out, int(run.Padded+c), b.row(buf, run.SrcRow+c))
			}
		}
	}
	// Node rows first, while RDMA rows may still be landing.
	if err := b.wait(ctx, a2a.TagNodeDispatch, l.NVLinkSize-1); err != nil {
		return err
	}
	copyRuns(rp.Runs[rp.RemoteRuns:])
	if err := b.wait(ctx, a2a.TagDispatch, rp.Imm[a2a.TagDispatch].Expected); err != nil {
		return err
	}
	copyRuns(rp.Runs[:rp.RemoteRuns])
	copy(out.ExpertTokens, rp.TokensPerExpert)
	if out.ExpertOffsets != nil {
		copy(out.ExpertOffsets, rp.ExpertOffsets)
	}
	b.w.steps <- stepDispatchBarrier
	return nil
}

func (b *Backend) CombineSend(ctx context.Context, p *a2a.Planner, in *a2a.CombineInput) error {
	// The dispatch barrier: every rank is done reading what it was sent,
	// and every transfer out of the send buffer completed.
	if err := await(ctx, b.w.txReady, "the dispatch barrier"); err != nil {
		return err
	}
	l, rp := &b.l, p.Recv()
	own := b.send[b.me]
	for _, run := range rp.Runs[:rp.RemoteRuns] {
		for c := int32(0); c < run.Count; c++ {
			copy(b.row(own, run.CombineRow+c), rows.ExpertRow(l, in, run.Padded+c))
		}
	}
	stride := uint64(l.Stride())
	b.combT = b.combT[:0]
	for _, t := range rp.Combine {
		b.combT = append(b.combT, fabric.ScatterTarget{Dst: b.recvDesc[t.Peer], Length: uint64(t.Rows) * stride,
			SrcOffset: uint64(t.SrcRow) * stride, DstOffset: uint64(t.DstRow) * stride})
	}
	if err := b.scatter(b.combT, b.sendReg, a2a.TagCombine, fabric.ShardBytes(), b.combG); err != nil {
		return err
	}
	D := int32(l.ReplicaSize)
	for _, run := range rp.Runs[rp.RemoteRuns:] {
		for q := run.Group * D; q < run.Group*D+D; q++ {
			dst := b.recv[b.peer(q)]
			for c := int32(0); c < run.Count; c++ {
				copy(b.row(dst, run.CombineRow+c), rows.ExpertRow(l, in, run.Padded+c))
			}
		}
	}
	return b.signal(b.nodeDsts, a2a.TagNodeCombine)
}

func (b *Backend) CombineRecv(ctx context.Context, p *a2a.Planner, out *a2a.CombineOutput) error {
	l := &b.l
	if err := b.wait(ctx, a2a.TagNodeCombine, l.NVLinkSize-1); err != nil {
		return err
	}
	if err := b.wait(ctx, a2a.TagCombine, p.Recv().Imm[a2a.TagCombine].Expected); err != nil {
		return err
	}
	own := b.recv[b.me]
	rows.Reduce(l, p.Send(), out, b.acc, func(pos int32) []byte { return b.row(own, pos) })
	b.w.steps <- stepCombineBarrier
	return nil
}
