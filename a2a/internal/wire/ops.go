package wire

import (
	"context"
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/fabric"
)

// scatter posts one scatter of tag and counts what it posted (Traffic):
// the targets' bytes and rows, the transport rows they carry.
func (w *Wiring) scatter(targets []fabric.ScatterTarget, rows uint64, src *fabric.MemoryRegion, tag a2a.Tag, route fabric.ScatterRouting, g fabric.PeerGroup) error {
	if len(targets) == 0 {
		return nil
	}
	s := fabric.ScatterWrite{Src: src, Targets: targets, Imm: fabric.Immediate(w.imm(tag)), Route: route, Group: g}
	if err := w.eng.SubmitScatter(s, fabric.Count(w.done)); err != nil {
		return fmt.Errorf("a2a %v scatter: %w", tag, err)
	}
	w.posted++
	var bytes uint64
	for _, t := range targets {
		bytes += t.Length
	}
	w.traffic[tag].add(bytes, rows)
	return nil
}

// targets turns planned transfers of tag's phase into scatter targets
// (into dst, reused): rows at the phase's own stride, so a write carries
// its rows and no padding up to the other phase's row size. It returns
// the rows the transfers carry too.
func (w *Wiring) targets(dst []fabric.ScatterTarget, ts []a2a.Transfer, tag a2a.Tag) ([]fabric.ScatterTarget, uint64) {
	stride := uint64(w.l.PhaseStride(tag))
	dst = dst[:0]
	var rows uint64
	for _, t := range ts {
		dst = append(dst, fabric.ScatterTarget{Dst: w.recvDesc[t.Peer], Length: uint64(t.Rows) * stride,
			SrcOffset: uint64(t.SrcRow) * stride, DstOffset: uint64(t.DstRow) * stride})
		rows += uint64(t.Rows)
	}
	return dst, rows
}

// Routes posts this rank's count row (row Group(Rank) of its table) to
// the same row of every other group's serving replica.
func (w *Wiring) Routes() error {
	if !w.ringing() {
		return w.scatter(w.routeT, uint64(len(w.routeT)), w.tableReg, a2a.TagRoute, fabric.ShardPeers(), w.routeG)
	}
	// A peer whose table is lent gets the row stored, then its bell rung.
	w.routeLeft = w.routeLeft[:0]
	for i, q := range w.routeRanks {
		t := &w.routeT[i]
		b, m := w.peerTable(int(q))
		if b == nil {
			w.routeLeft = append(w.routeLeft, *t)
			continue
		}
		copy(b[t.DstOffset:t.DstOffset+t.Length], w.bell.own[t.SrcOffset:t.SrcOffset+t.Length])
		w.ringHeld(b, a2a.TagRoute, 1)
		m.Release()
		w.traffic[a2a.TagRoute].add(0, 1)
	}
	g := w.routeG
	if len(w.routeLeft) != len(w.routeT) {
		g = fabric.PeerGroup{}
	}
	return w.scatter(w.routeLeft, uint64(len(w.routeLeft)), w.tableReg, a2a.TagRoute, fabric.ShardPeers(), g)
}

// Dispatch posts the eager and the overflow writes (Eager, then
// Overflow); with doorbells, a write of zero rows (its rows stored into
// the peer's buffer already, or none) to a peer whose table is lent is
// not posted: the peer's bell is rung for all of them at once, after
// them.
func (w *Wiring) Dispatch(eager, over []a2a.Transfer) error {
	if !w.ringing() {
		if err := w.Eager(eager); err != nil {
			return err
		}
		return w.Overflow(over)
	}
	var rows uint64
	w.eagerT, rows = w.targets(w.eagerT, eager, a2a.TagDispatch)
	w.eagerLeft = w.keep(w.eagerLeft, w.eagerT, eager, 1)
	g := w.eagerG
	if len(w.eagerLeft) != len(w.eagerT) {
		g = fabric.PeerGroup{}
	}
	if err := w.scatter(w.eagerLeft, rows, w.sendReg, a2a.TagDispatch, fabric.ShardPeers(), g); err != nil {
		return err
	}
	w.overT, rows = w.targets(w.overT, over, a2a.TagDispatch)
	w.overLeft = w.keep(w.overLeft, w.overT, over, w.l.NICsPerGPU)
	if err := w.scatter(w.overLeft, rows, w.sendReg, a2a.TagDispatch, fabric.ShardBytes(), fabric.PeerGroup{}); err != nil {
		return err
	}
	return w.ringPending(a2a.TagDispatch)
}

// keep copies into left the targets that must go through the engine and
// adds imms credits to w.pend for each zero-row one whose peer's table is
// lent.
func (w *Wiring) keep(left, ts []fabric.ScatterTarget, tr []a2a.Transfer, imms int) []fabric.ScatterTarget {
	left = left[:0]
	for i := range ts {
		q := tr[i].Peer
		if tr[i].Rows == 0 && w.lent(int(q)) {
			w.pend[q] += imms
			continue
		}
		left = append(left, ts[i])
	}
	return left
}

// lent says whether rank q's table is lent here (mapping it if it can).
func (w *Wiring) lent(q int) bool {
	b, m := w.peerTable(q)
	if b == nil {
		return false
	}
	m.Release()
	return true
}

// ringPending rings every rank with pending credits of tag. A mapping
// taken away meanwhile cannot happen quietly: the peer is lost, and its
// waits end anyway.
func (w *Wiring) ringPending(tag a2a.Tag) error {
	for q, n := range w.pend {
		if n == 0 {
			continue
		}
		w.pend[q] = 0
		if !w.ring(q, tag, n) {
			return fmt.Errorf("a2a rank %d: rank %d's table was taken away: %w", w.l.Rank, q, w.LostRankOr(q))
		}
	}
	return nil
}

// Eager posts the eager writes (SendPlan.Eager: one per served rank of
// another domain, in rank order, sharded by peer).
func (w *Wiring) Eager(ts []a2a.Transfer) error {
	var rows uint64
	w.eagerT, rows = w.targets(w.eagerT, ts, a2a.TagDispatch)
	return w.scatter(w.eagerT, rows, w.sendReg, a2a.TagDispatch, fabric.ShardPeers(), w.eagerG)
}

// Overflow posts the overflow writes (SendPlan.Overflow), split by bytes.
func (w *Wiring) Overflow(ts []a2a.Transfer) error {
	var rows uint64
	w.overT, rows = w.targets(w.overT, ts, a2a.TagDispatch)
	return w.scatter(w.overT, rows, w.sendReg, a2a.TagDispatch, fabric.ShardBytes(), fabric.PeerGroup{})
}

// Combine posts the combine writes (RecvPlan.Combine), split by bytes.
func (w *Wiring) Combine(ts []a2a.Transfer) error {
	var rows uint64
	w.combT, rows = w.targets(w.combT, ts, a2a.TagCombine)
	if !w.ringing() {
		return w.scatter(w.combT, rows, w.sendReg, a2a.TagCombine, fabric.ShardBytes(), w.combG)
	}
	w.combLeft = w.keep(w.combLeft, w.combT, ts, w.l.NICsPerGPU)
	g := w.combG
	if len(w.combLeft) != len(w.combT) {
		g = fabric.PeerGroup{}
	}
	if err := w.scatter(w.combLeft, rows, w.sendReg, a2a.TagCombine, fabric.ShardBytes(), g); err != nil {
		return err
	}
	return w.ringPending(a2a.TagCombine)
}

// Signal sends one zero-byte immediate of tag to each active node peer
// (node tags) or to every other active rank (barrier and join tags).
func (w *Wiring) Signal(tag a2a.Tag) error {
	dsts, ranks := w.allDsts, w.allRanks
	if tag == a2a.TagNodeDispatch || tag == a2a.TagNodeCombine {
		dsts, ranks = w.nodeDsts, w.nodeRanks
	}
	if w.ringing() {
		left := w.sigLeft[tag][:0]
		for i, q := range ranks {
			if !w.ring(int(q), tag, 1) {
				left = append(left, dsts[i])
			}
		}
		w.sigLeft[tag], dsts = left, left
	}
	if len(dsts) == 0 {
		return nil
	}
	if err := w.eng.SubmitBarrier(fabric.Barrier{Imm: w.imm(tag), Dsts: dsts}, fabric.Count(w.done)); err != nil {
		return fmt.Errorf("a2a %v signal: %w", tag, err)
	}
	w.posted++
	return nil
}

// Wait takes n immediates of a credit tag, early arrivals included.
func (w *Wiring) Wait(ctx context.Context, tag a2a.Tag, n int) error {
	if n == 0 {
		return nil
	}
	if w.ringing() {
		return w.waitBells(ctx, tag, n)
	}
	if w.counters[tag] == nil {
		return fmt.Errorf("a2a wait %v: %w", tag, ErrNoCounter)
	}
	return w.waitImm(ctx, tag, n)
}

// Arm asks the flag counter of tag to raise its flag once n more
// immediates have arrived (at once if they already have).
func (w *Wiring) Arm(tag a2a.Tag, n int) error {
	f := w.flags[tag]
	if f == nil {
		return fmt.Errorf("a2a arm %v: %w", tag, ErrNoCounter)
	}
	if err := f.Wait(int64(n)); err != nil {
		return fmt.Errorf("a2a rank %d: arm %v flag: %w", w.l.Rank, tag, err)
	}
	return nil
}

// Drain waits until every transfer posted so far completed, so the
// buffers they read may be reused, and reports any that failed.
func (w *Wiring) Drain(ctx context.Context) error {
	if err := w.done.Wait(ctx, w.posted); err != nil {
		return fmt.Errorf("a2a rank %d: %d of %d transfers completed (%s): %w: %w", w.l.Rank, w.done.Done(), w.posted, w.suspects(), a2a.ErrTimeout, err)
	}
	if n := w.done.Errors(); n > 0 {
		first := w.done.Err()
		re := w.rankError(first)
		if re == nil {
			re = w.awaitLost(ctx)
		}
		if re != nil {
			return fmt.Errorf("a2a rank %d: %d transfers failed (the first with: %v): %w", w.l.Rank, n, first, re)
		}
		return fmt.Errorf("a2a rank %d: %d transfers failed, the first with: %w", w.l.Rank, n, first)
	}
	return nil
}

// Barrier: every transfer of this phase is complete here and every
// active rank is past the phase's reads, so all buffers may be reused.
func (w *Wiring) Barrier(ctx context.Context, tag a2a.Tag) error {
	if err := w.Signal(tag); err != nil {
		return err
	}
	if err := w.Wait(ctx, tag, len(w.allDsts)); err != nil {
		return err
	}
	return w.Drain(ctx)
}

// Direct returns rank q's receive buffer as this process maps it, held
// until ReleaseDirect, when the transport lends its mapping (ipc, once it
// has written there: see fabric.Engine.MapPeer); nil otherwise. Rows
// stored there need a write of zero rows of their tag to carry the
// immediate, posted after the stores, before ReleaseDirect or after.
// Hold it only for a phase's copies: a peer unregistering or lost waits
// for the holders.
func (w *Wiring) Direct(q int32) []byte {
	if w.noLend {
		return nil
	}
	m := w.peerMem[q]
	if m == nil {
		var ok bool
		var err error
		m, ok, err = w.eng.MapPeer(w.dev, w.recvDesc[q])
		if errors.Is(err, fabric.ErrNotSupported) {
			w.noLend = true
		}
		if !ok {
			return nil
		}
		w.peerMem[q] = m
	}
	b, ok := m.Acquire()
	if !ok {
		w.peerMem[q] = nil // being taken away: through the engine, ask later
		return nil
	}
	w.held = append(w.held, m)
	return b
}

// ReleaseDirect lets go of every buffer Direct returned.
func (w *Wiring) ReleaseDirect() {
	for _, m := range w.held {
		m.Release()
	}
	clear(w.held)
	w.held = w.held[:0]
}
