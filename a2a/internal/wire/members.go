package wire

import (
	"context"
	"fmt"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/fabric"
)

// Membership changes (a2a.Context.SetActiveRanks). A backend changes its
// wiring in this order, every member alike:
//
//	Quiesce     its own transfers of the generation given up are complete
//	            (or failed): nothing of this rank is in flight any more
//	SetActive   the new bank's counters, the descriptors (with an
//	            exchanger), watches and target lists of the new members;
//	            then join phase 1: a join immediate to every other member,
//	            and wait for theirs: every member is quiet
//	(backend)   it resets what peers write into (flags, epochs), which is
//	            safe now that no member writes anything of the old
//	            generation
//	Joined      join phase 2: another join immediate each way, so every
//	            member reset before any starts the new generation
//
// The join counter counts both phases cumulatively: a member's second
// immediate can arrive before a slower member's first, but it is sent
// only after its sender saw every member's first, so 2(A-1) arrivals
// mean every member finished phase 1 and A-1 arrivals mean every member
// is at least quiet. Immediates of the old generation, late ones included
// (a lost rank's last writes, a slow completion), carry the old bank's
// values: no counter of the new generation counts them.

// Quiesce waits until every transfer this rank posted has finished,
// successfully or not (transfers to a lost rank fail), then starts a new
// count for the next generation. Its failures are forgotten: they belong
// to the generation given up.
func (w *Wiring) Quiesce(ctx context.Context) error {
	if err := w.done.Wait(ctx, w.posted); err != nil {
		return fmt.Errorf("a2a rank %d: quiesce: %d of %d transfers finished (%s): %w: %w", w.l.Rank, w.done.Done(),
			w.posted, w.suspects(), a2a.ErrTimeout, err)
	}
	w.done, w.posted = new(fabric.TransferCounter), 0
	return nil
}

// SetActive rewires this rank for generation gen and the members m (a
// planner's, already set to them), and runs join phase 1. ex, when not
// nil, all-gathers descriptors over the members; a wiring built with
// Options.Join needs one. Call Quiesce first.
func (w *Wiring) SetActive(ctx context.Context, gen uint32, m *a2a.Members, ex Exchanger) error {
	if w.posted != 0 {
		return fmt.Errorf("a2a rank %d: set active: %d transfers not quiesced: %w", w.l.Rank, w.posted, a2a.ErrInvalidArgument)
	}
	if ex == nil {
		for q, a := range m.Active {
			if a && w.descs[q] == nil {
				return fmt.Errorf("a2a rank %d: set active: rank %d's descriptors are unknown (an Exchange is needed): %w",
					w.l.Rank, q, a2a.ErrInvalidArgument)
			}
		}
	}
	w.unwire()
	w.gen = gen
	if err := w.wireUp(ctx, m, ex); err != nil {
		return err
	}
	return w.join(ctx)
}

// Joined runs join phase 2 and waits for the join signals to complete.
func (w *Wiring) Joined(ctx context.Context) error {
	if err := w.join(ctx); err != nil {
		return err
	}
	return w.Drain(ctx)
}

// join signals every other member on the join tag and takes one
// immediate per other member.
func (w *Wiring) join(ctx context.Context) error {
	if err := w.Signal(a2a.TagJoin); err != nil {
		return err
	}
	return w.Wait(ctx, a2a.TagJoin, w.joinWait)
}

// Generation returns the membership generation the wiring runs in.
func (w *Wiring) Generation() uint32 { return w.gen }
