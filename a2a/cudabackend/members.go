package cudabackend

import (
	"context"
	"fmt"

	"github.com/ferryrdma/ferry/a2a"
)

// Membership changes (a2a.MembershipBackend). The kernels read the active
// ranks from a per-rank table (A2A_RANK_* flags: which ranks this one
// serves, which are active): they drop the copies for inactive ranks'
// experts (combine leaves their slots out), wait for and publish to active
// node ranks only, and store combine results into active replicas only.
// Their epochs start again from 0 in each generation, on every member
// alike: the reset happens between the two join phases, when no member
// writes anything of the old generation any more and none has started the
// new one.

// Joining reports whether the backend was built with Options.Join and has
// not joined yet.
func (b *Backend) Joining() bool { return b.joining }

// Quiesce stops the worker of the generation being given up, waits for
// the stream (a kernel that timed out has ended; one still running fails
// this) and for every transfer this rank posted. Bounded by ctx and
// Options.Timeout.
func (b *Backend) Quiesce(ctx context.Context) error {
	if b.closed {
		return fmt.Errorf("a2a cuda backend: %w", a2a.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	b.stopWorker()
	b.w = nil
	if err := b.st.Sync(ctx); err != nil {
		return fmt.Errorf("a2a cuda rank %d: quiesce: a kernel still runs: %w", b.l.Rank, err)
	}
	return b.wire.Quiesce(ctx)
}

// SetActive plans for m (the worker's planner and the kernels' rank
// table), moves the wiring to the new generation (join phase 1), resets
// the epochs, flags and own sync slots, meets the members again (phase 2)
// and starts a new worker. Bounded by ctx and Options.Timeout.
func (b *Backend) SetActive(ctx context.Context, p *a2a.Planner, m *a2a.Membership) error {
	if b.w != nil {
		return fmt.Errorf("a2a cuda backend: set active ranks before quiescing: %w", a2a.ErrCallOrder)
	}
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	if err := b.planner.SetActive(m.Active); err != nil {
		return err
	}
	mb := b.planner.Members()
	if err := b.dev.Upload(b.ranks.Addr(), encodeRanks(mb)); err != nil {
		return err
	}
	if err := b.wire.SetActive(ctx, m.Generation, mb, m.Exchange); err != nil {
		return err
	}
	if err := b.resetEpochs(); err != nil {
		return err
	}
	if err := b.wire.Joined(ctx); err != nil {
		return err
	}
	b.joining = false
	b.startWorker()
	return nil
}

// resetEpochs starts the kernels' epochs again: the kernels' state (the
// iteration count; the abort word, which holds the id of the last launch
// that gave up and is never cleared by the kernels, since ids repeat once
// the count starts again; the block counters and the grid barrier, which
// an aborted launch may have left mid-way), every control word (flags and
// statuses), and this rank's sync slots, which node peers write their
// epochs into. No kernel of this rank runs now.
func (b *Backend) resetEpochs() error {
	for _, w := range b.ctrlWords {
		w.Store(0)
	}
	b.epoch = 0
	if err := b.dev.Upload(b.state.Addr(), make([]byte, stateSize)); err != nil {
		return err
	}
	me := b.l.Rank - b.l.Node(b.l.Rank)*b.l.NVLinkSize
	return b.dev.Upload(b.recv[me]+uint64(b.l.RecvBytes), make([]byte, 8*b.l.NVLinkSize))
}
