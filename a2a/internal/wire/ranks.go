package wire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/fabric"
)

// Lost ranks. Every credit counter watches every other active rank's endpoints
// (fabric.ImmCounter.Watch): when the engine declares one lost (its
// process died, its connection broke, or it stopped answering heartbeats),
// a wait on any counter ends with that, and the error names the rank
// instead of running into the call's timeout. A wait that times out names
// the ranks the engine knows are lost, if any.

// watchRanks binds the credit counters to every other active rank: the
// main address of a peer (its count table's NIC 0) is enough to watch its
// process; every endpoint address is named when an operation on it fails
// (rankOf, filled by the exchange). Inactive ranks are not watched: no
// wait is for them.
func (w *Wiring) watchRanks(m *a2a.Members) error {
	var main []fabric.Address
	for _, q := range m.Others {
		if len(w.tableDesc[q].NICs) > 0 {
			main = append(main, w.tableDesc[q].NICs[0].Addr)
		}
	}
	if len(main) == 0 {
		return nil
	}
	for _, c := range w.counters {
		if c == nil {
			continue
		}
		stop, err := c.Watch(main...)
		if err != nil {
			return fmt.Errorf("a2a wiring: watch the other ranks: %w", err)
		}
		w.unwatch = append(w.unwatch, stop)
	}
	return nil
}

// rankError returns a *a2a.RankError when err says a peer of a known rank
// was lost, else nil.
func (w *Wiring) rankError(err error) error {
	var pe *fabric.PeerError
	if !errors.As(err, &pe) {
		return nil
	}
	q, ok := w.rankOf[pe.Peer]
	if !ok {
		return nil
	}
	return &a2a.RankError{Rank: q, Err: err}
}

// lostGrace bounds how long a transfer failure that names no peer (a
// provider's error completion, a region gone with its process) waits for
// the engine to declare an active rank lost, so that the error names it.
// The engine checks its peers every fabric.Config.LivenessInterval (500 ms
// by default).
const lostGrace = 3 * time.Second

// awaitLost returns a *a2a.RankError for the first active rank the engine
// declares lost within lostGrace (or ctx), else nil.
func (w *Wiring) awaitLost(ctx context.Context) error {
	deadline := time.Now().Add(lostGrace)
	for {
		if err := w.LostRank(); err != nil {
			return err
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// LostRank returns a *a2a.RankError for the first active rank the engine
// has declared lost, else nil. It takes a lock per rank: for waits that
// already back off, not for per-operation paths.
func (w *Wiring) LostRank() error {
	for q, a := range w.active {
		if !a || q == w.l.Rank || len(w.tableDesc[q].NICs) == 0 {
			continue
		}
		if err := w.eng.PeerStatus(w.tableDesc[q].NICs[0].Addr); err != nil {
			return &a2a.RankError{Rank: q, Err: err}
		}
	}
	return nil
}

// suspects says which active ranks the engine knows are lost, for a
// timeout.
func (w *Wiring) suspects() string {
	var lost []string
	seen := map[int]bool{}
	for a, q := range w.rankOf {
		if !seen[q] && w.active[q] && w.eng.PeerStatus(a) != nil {
			seen[q] = true
			lost = append(lost, fmt.Sprint(q))
		}
	}
	if len(lost) == 0 {
		return "no rank known lost"
	}
	slices.Sort(lost)
	return "ranks known lost: " + strings.Join(lost, ", ")
}
