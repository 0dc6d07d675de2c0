package directory

import (
	"context"
	"fmt"
	"net"
	"slices"

	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// RendezvousLabel is the label an engine that joins a world through the
// directory publishes: the host:port its rendezvous listener is on, which
// serves the world's store if the engine turns out to be rank 0.
const RendezvousLabel = "ferry.rendezvous"

// WorldConfig gathers a world of size world under d, instead of taking it
// from a launcher's environment: it waits for world live entries matching
// sel (WaitFor), gives ranks in name order, and returns base with Rank,
// WorldSize and Master filled in, and, on rank 0, Listener set to ln
// (others close ln). Pass the result to rendezvous.Join; base carries the
// job's Token and the other settings, shared by every process.
//
// The caller has published me, matching sel, with RendezvousLabel set to
// ln's address. Every process must see the same world: start exactly
// world of them; one more matching entry fails here, and a process that
// leaves while the others gather makes Join fail by its timeout.
func WorldConfig(ctx context.Context, d Directory, me Entry, sel Selector, world int, ln net.Listener, base rendezvous.Config) (rendezvous.Config, error) {
	fail := func(format string, args ...any) (rendezvous.Config, error) {
		return rendezvous.Config{}, fmt.Errorf("world of %d by %q: "+format, append([]any{world, sel}, args...)...)
	}
	if ln == nil || me.Labels[RendezvousLabel] != ln.Addr().String() {
		return fail("entry %s must carry label %s=<its listener's address>: %w", me.Name, RendezvousLabel, ErrInvalid)
	}
	if !sel.Matches(me) {
		return fail("entry %s does not match: %w", me.Name, ErrInvalid)
	}
	got, err := WaitFor(ctx, d, sel, world)
	if err != nil {
		return fail("%w", err)
	}
	if len(got) != world {
		return fail("%d engines match: %w", len(got), ErrInvalid)
	}
	rank := slices.IndexFunc(got, func(e Entry) bool { return e.Name == me.Name })
	if rank < 0 {
		return fail("this engine %s is not among those found: %w", me.Name, ErrNotFound)
	}
	master := got[0].Labels[RendezvousLabel]
	if master == "" {
		return fail("rank 0 (%s) has no %s label: %w", got[0].Name, RendezvousLabel, ErrInvalid)
	}
	cfg := base
	cfg.Rank, cfg.WorldSize, cfg.Master, cfg.Source = rank, world, master, "directory"
	cfg.Listener = nil
	if rank == 0 {
		cfg.Listener = ln
	} else {
		_ = ln.Close()
	}
	return cfg, nil
}
