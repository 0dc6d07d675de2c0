package fabric

import "fmt"

// Remote regions found unregistered. When a write fails because its
// target has no region with the write's key (the provider's error matches
// ErrUnknownRegion: the target unregistered it, or never registered it),
// the worker remembers the region, by the peer's address and the key, and
// fails every later write to it when it accepts it: at once, without a
// post and without waiting for another error from the target. Keys are
// not reused by the providers that report this (ipc draws them at random,
// mem counts them up), so a region registered anew has another key.

// regionRef names a remote region: its peer's address and key.
type regionRef struct {
	addr Address
	key  uint64
}

// regionGone records the region of op number op of c as unregistered.
func (w *worker) regionGone(ps *peerState, c *opCtx, op int) {
	key := c.rkey
	if c.kind == reqScatter {
		if c.pp > 1 {
			op /= c.pp
		}
		if op >= ctxOpMask || op >= len(c.targets) {
			return
		}
		key = c.scatterKey(op, len(w.doms)).Key
	} else if c.ps == nil {
		return
	}
	if w.peerHealth.goneRegions == nil {
		w.peerHealth.goneRegions = make(map[regionRef]struct{})
	}
	w.peerHealth.goneRegions[regionRef{ps.addr, key}] = struct{}{}
}

// checkRegion fails a write to a region found unregistered.
func (w *worker) checkRegion(what string, p *peerState, key uint64) error {
	if _, gone := w.peerHealth.goneRegions[regionRef{p.addr, key}]; gone {
		return fmt.Errorf("%s: region %#x of peer %s was unregistered (an earlier write found it gone): %w",
			what, key, p.addr, ErrUnknownRegion)
	}
	return nil
}
