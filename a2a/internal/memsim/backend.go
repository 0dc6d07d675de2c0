package memsim

import (
	"context"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/rows"
)

type backend struct {
	rk     *rank
	closed bool
}

var _ a2a.MembershipBackend = (*backend)(nil)

// drow returns dispatch row r of a transport buffer, crow combine row r:
// each phase lays its rows at its own stride (a2a.Layout.PhaseStride).
func (b *backend) drow(buf []byte, r int32) []byte {
	s := b.rk.w.l.DispatchRow
	return buf[int(r)*s : int(r+1)*s]
}

func (b *backend) crow(buf []byte, r int32) []byte {
	s := b.rk.w.l.CombineRow
	return buf[int(r)*s : int(r+1)*s]
}

func (b *backend) DispatchSend(ctx context.Context, p *a2a.Planner, in *a2a.DispatchInput) error {
	rk, l := b.rk, p.Layout()
	sp := p.Send()
	g, RW := l.Group(rk.id), l.RowWords
	copy(rk.table[g*RW:(g+1)*RW], sp.Row)
	for _, q := range sp.Routes {
		to := rk.w.ranks[q]
		row := append([]uint32(nil), sp.Row...) // the bytes on the wire
		rk.inflight.Add(1)
		d := rk.w.delay()
		go func() {
			defer rk.inflight.Done()
			if d > 0 {
				time.Sleep(d)
			}
			copy(to.table[g*RW:(g+1)*RW], row)
			to.credit(int(a2a.TagRoute), 1)
		}()
	}
	K := l.ExpertsPerToken
	for i := range sp.Tokens * K {
		c := sp.Copy(i)
		switch {
		case c.Path.Staged():
			rows.Pack(l, b.drow(rk.send, c.Pos), in, i/K)
		case c.Path == a2a.PathNodePush:
			rows.Pack(l, b.drow(rk.w.ranks[c.Dest].recv, c.PushRow), in, i/K)
		}
	}
	rows.Fence()
	rk.signal(int(a2a.TagNodeDispatch), p.Members().Node)
	for _, t := range sp.Eager {
		rk.writeRows(t, a2a.TagDispatch, false)
	}
	for _, t := range sp.Overflow {
		rk.writeRows(t, a2a.TagDispatch, true)
	}
	return nil
}

func (b *backend) DispatchRecv(ctx context.Context, p *a2a.Planner, out *a2a.DispatchOutput) error {
	rk, l := b.rk, p.Layout()
	if err := rk.wait(ctx, int(a2a.TagRoute), p.Members().Live-1); err != nil {
		return err
	}
	if err := p.PlanRecv(rk.table); err != nil {
		return err
	}
	rp := p.Recv()
	if err := rk.wait(ctx, int(a2a.TagNodeDispatch), rp.Imm[a2a.TagNodeDispatch].Expected); err != nil {
		return err
	}
	copyRuns := func(runs []a2a.Run) {
		for i := range runs {
			run := &runs[i]
			buf := rk.recv
			switch run.Kind {
			case a2a.SourceOwnSend:
				buf = rk.send
			case a2a.SourcePeerSend:
				buf = rk.w.ranks[run.Source].send
			}
			for c := int32(0); c < run.Count; c++ {
				rows.Unpack(l, out, int(run.Padded+c), b.drow(buf, run.SrcRow+c))
			}
		}
		rows.Fence()
	}
	copyRuns(rp.Runs[rp.RemoteRuns:])
	if err := rk.wait(ctx, int(a2a.TagDispatch), rp.Imm[a2a.TagDispatch].Expected); err != nil {
		return err
	}
	copyRuns(rp.Runs[:rp.RemoteRuns])
	copy(out.ExpertTokens, rp.TokensPerExpert)
	if out.ExpertOffsets != nil {
		copy(out.ExpertOffsets, rp.ExpertOffsets)
	}
	return rk.barrier(ctx, a2a.TagDispatchBarrier, p.Members())
}

func (b *backend) CombineSend(ctx context.Context, p *a2a.Planner, in *a2a.CombineInput) error {
	rk, l := b.rk, p.Layout()
	rp := p.Recv()
	yrow := func(i int32) []byte { return rows.ExpertRow(l, in, i) }
	for _, run := range rp.Runs[:rp.RemoteRuns] {
		for c := int32(0); c < run.Count; c++ {
			copy(b.crow(rk.send, run.CombineRow+c), yrow(run.Padded+c))
		}
	}
	for _, t := range rp.Combine {
		rk.writeRows(t, a2a.TagCombine, true)
	}
	D := l.ReplicaSize
	for _, run := range rp.Runs[rp.RemoteRuns:] {
		for q := int(run.Group) * D; q < int(run.Group)*D+D; q++ {
			if !p.Active(q) {
				continue
			}
			dst := rk.w.ranks[q].recv
			for c := int32(0); c < run.Count; c++ {
				copy(b.crow(dst, run.CombineRow+c), yrow(run.Padded+c))
			}
		}
	}
	rk.signal(int(a2a.TagNodeCombine), p.Members().Node)
	return nil
}

func (b *backend) CombineRecv(ctx context.Context, p *a2a.Planner, out *a2a.CombineOutput) error {
	rk, l := b.rk, p.Layout()
	if err := rk.wait(ctx, int(a2a.TagNodeCombine), p.Recv().Imm[a2a.TagNodeCombine].Expected); err != nil {
		return err
	}
	if err := rk.wait(ctx, int(a2a.TagCombine), p.Recv().Imm[a2a.TagCombine].Expected); err != nil {
		return err
	}
	// The pure Go loop: the simulated world checks the protocol, and the
	// host backend's tests check the vector loops.
	acc := make([]float32, l.Hidden)
	rows.ReduceGo(l, p.Send(), out, acc, func(pos int32) []byte { return b.crow(rk.recv, pos) })
	return rk.barrier(ctx, a2a.TagCombineBarrier, p.Members())
}

// SetActive: every member is quiet (its writes landed) before any
// resets its counters, and every member reset before any goes on.
func (b *backend) SetActive(ctx context.Context, p *a2a.Planner, m *a2a.Membership) error {
	rk, mb := b.rk, p.Members()
	join := int(a2a.TagJoin)
	rk.signal(join, mb.Others)
	if err := rk.wait(ctx, join, len(mb.Others)); err != nil {
		return err
	}
	rk.mu.Lock()
	for c := range rk.counter {
		if c != join {
			rk.counter[c] = 0
		}
	}
	rk.mu.Unlock()
	rk.signal(join, mb.Others)
	return rk.wait(ctx, join, len(mb.Others))
}

func (b *backend) Joining() bool { return false }

// Quiesce waits for this rank's writes to land.
func (b *backend) Quiesce(ctx context.Context) error {
	b.rk.inflight.Wait()
	return nil
}

func (b *backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.rk.inflight.Wait()
	return nil
}
