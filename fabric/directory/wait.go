package directory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// WaitFor waits until at least n live entries under d match sel, and
// returns those live then, sorted by name: how a process started late
// finds the engines it needs (a decode process the prefill pool), or a
// fixed-size group gathers (ranks in name order). It fails with ctx's
// error when ctx ends first, and with ErrClosed when d is closed.
func WaitFor(ctx context.Context, d Directory, sel Selector, n int) ([]Entry, error) {
	if d == nil || n < 1 {
		return nil, fmt.Errorf("wait for %d of %q: %w", n, sel, ErrInvalid)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := d.Watch(ctx)
	if err != nil {
		return nil, fmt.Errorf("wait for %d of %q: %w", n, sel, err)
	}
	live := make(map[string]Entry)
	for ev := range events {
		switch ev.Kind {
		case Joined, Updated:
			if sel.Matches(ev.Entry) {
				live[ev.Entry.Name] = ev.Entry
			} else {
				delete(live, ev.Entry.Name)
			}
		case Lost, Closed:
			delete(live, ev.Entry.Name)
		}
		if len(live) >= n {
			out := slices.Collect(maps.Values(live))
			slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
			return out, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("wait for %d of %q: %d found: %w", n, sel, len(live), err)
	}
	return nil, fmt.Errorf("wait for %d of %q: %w", n, sel, ErrClosed)
}
