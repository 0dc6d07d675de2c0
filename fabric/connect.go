package fabric

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// Connect warms peers up before the first transfer to them: on every NIC
// of every group it resolves each address (the provider's address vector
// entry, queue pairs, sockets: what the first write would otherwise set
// up), asks providers that can check a peer (shm) whether it is alive,
// and, where the provider has a heartbeat (tcp;ofi_rxm, verbs), posts one
// and waits for the peer's answer, which completes the provider's
// connection setup (the rxm connection, the RC handshake). Transfers to a
// connected peer then start with everything in place.
//
// A peer that cannot be reached (no endpoint at the address, a refused or
// reset connection, a process that exited) fails Connect with a
// *PeerError (errors.Is ErrPeerLost), which the engine also records as it
// does for a failed transfer; ctx bounds the wait, and its end fails
// Connect with ErrTimeout (deadline) or the context's error. Connect is
// idempotent: connecting a connected peer checks it again and changes
// nothing else.
//
// Each address is a NIC address of a peer (MainAddress, or one of a
// descriptor's NICs): it is resolved on every local NIC, since which
// local NIC writes to it depends on the request.
func (e *Engine) Connect(ctx context.Context, addrs ...Address) error {
	if e == nil {
		return errNilEngine
	}
	for _, a := range addrs {
		if a.IsZero() {
			return fmt.Errorf("connect: empty address: %w", ErrInvalidArgument)
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("connect: %w", ctxErr(ctx))
	}
	var errs []error
	for _, w := range e.workers {
		if err := e.connectWorker(ctx, w, addrs); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// connectWorker connects addrs on every domain of w and waits for their
// heartbeats to come back.
func (e *Engine) connectWorker(ctx context.Context, w *worker, addrs []Address) error {
	start := int64(-1)
	// One step runs on the worker's thread: resolve, check, post a
	// heartbeat where none is with the provider, and tell whether every
	// peer answered since start.
	step := func(w *worker) (done bool, err error) {
		if start < 0 {
			start = w.now
		}
		done = true
		var errs []error
		for di, ds := range w.doms {
			pc, _ := ds.d.(rdma.PeerChecker)
			pr, _ := ds.d.(rdma.PeerProber)
			for _, a := range addrs {
				ps, err := ds.resolve(a)
				if err != nil {
					errs = append(errs, connectErr(a, di, err))
					continue
				}
				ps.used = w.now
				if pc != nil && ps.lost == nil {
					if err := pc.CheckPeer(ps.id); err != nil {
						w.peerLost(ds, ps, err, true)
					}
				}
				if ps.lost != nil {
					errs = append(errs, ps.lost)
					continue
				}
				if pr == nil || ps.answered >= start {
					continue
				}
				done = false
				if !ps.probing && ds.posted < ds.depth && !w.postProbe(ds, di, pr, ps) {
					// The provider has no heartbeat for this peer:
					// resolving it was all there is to set up.
					ps.answered = w.now
					done = true
				}
			}
		}
		if len(errs) > 0 {
			return true, errors.Join(errs...)
		}
		return done, nil
	}
	wait := time.Millisecond
	for {
		var done bool
		var stepErr error
		if err := e.control(w, func(w *worker) { done, stepErr = step(w) }); err != nil {
			return fmt.Errorf("connect: group %s: %w", w.dev, err)
		}
		if stepErr != nil {
			return fmt.Errorf("connect: group %s: %w", w.dev, stepErr)
		}
		if done {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("connect: group %s: peers did not answer: %w", w.dev, ctxErr(ctx))
		case <-t.C:
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// connectErr types a failure to resolve a peer: an address the provider
// cannot parse or serve keeps its own error; anything else means no peer
// answers there, a *PeerError (and only that: not ErrInvalidArgument).
func connectErr(a Address, nic int, err error) error {
	if errors.Is(err, ErrBadEncoding) || errors.Is(err, ErrNotSupported) || errors.Is(err, ErrClosed) {
		return fmt.Errorf("resolve %s on nic %d: %w", a, nic, err)
	}
	if errors.Is(err, ErrPeerLost) {
		var pe *PeerError
		if errors.As(err, &pe) {
			return err
		}
	}
	// The provider's sentinel (ErrInvalidArgument for an unknown
	// endpoint) is kept as text only: the peer is what is wrong, not the
	// argument, and the C ABI maps the first sentinel it finds.
	return &PeerError{Peer: a, Cause: fmt.Errorf("resolve on nic %d: %v", nic, err)}
}
