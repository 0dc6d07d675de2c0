package directory

import (
	"context"
	"fmt"
	"sync"

	"github.com/ferryrdma/ferry/fabric"
)

// LoseOnLeave ties eng's peer liveness to d: when an engine's entry under
// d's prefix is Lost (its lease ran out) or Closed, every address it
// published is declared lost in eng (fabric.Engine.DeclarePeerLost), with
// a cause wrapping ErrEntryLost or ErrEntryClosed. Work eng has queued to
// it fails with a *fabric.PeerError at once, new work fails fast, and
// counters bound to it (ImmCounter.Watch) stop waiting, without waiting for
// eng's own liveness checks. Only peers eng has used are affected; a peer
// that is in fact alive comes back on its own (see DeclarePeerLost). eng's
// own entry, should it lapse, is ignored.
//
// The watch runs until ctx ends, d is closed or stop is called; stop waits
// for it to end. Entries that disappear while d's server is unreachable
// are reported when it is reachable again.
func LoseOnLeave(ctx context.Context, d Directory, eng *fabric.Engine) (stop func(), err error) {
	if d == nil || eng == nil {
		return nil, fmt.Errorf("lose on leave: nil directory or engine: %w", ErrInvalid)
	}
	ctx, cancel := context.WithCancel(ctx)
	events, err := d.Watch(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("lose on leave: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range events {
			var cause error
			switch ev.Kind {
			case Lost:
				cause = fmt.Errorf("engine %s: %w", ev.Entry.Name, ErrEntryLost)
			case Closed:
				cause = fmt.Errorf("engine %s: %w", ev.Entry.Name, ErrEntryClosed)
			default:
				continue
			}
			if ev.Entry.Main() == eng.MainAddress() {
				// eng's own entry lapsed (eng was cut off from the
				// directory): nothing about eng's peers.
				continue
			}
			for _, a := range ev.Entry.Addrs {
				// Fails only once eng is closed, when there is nothing
				// left to fail.
				_ = eng.DeclarePeerLost(a, cause)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}, nil
}
