package fabric_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/memfabric"
)

func domAddr(e *fabric.Engine, nic int) fabric.Address {
	return e.Info().Groups[0].Domains[nic].Address
}

// waitPosted waits until NIC nic of e has posted n ops in all.
func waitPosted(t *testing.T, e *fabric.Engine, nic int, n uint64) {
	t.Helper()
	require.Eventually(t, func() bool { return e.Stats().Domains[nic].Posted == n }, 5*time.Second, time.Millisecond)
}

// failHeldWrite makes the writes a's NIC nic holds come back, the first
// of them as a reset connection, after the peer they went to died.
func failHeldWrite(t *testing.T, a *fabric.Engine, nic int, deadPeers ...fabric.Address) {
	t.Helper()
	for _, p := range deadPeers {
		require.NoError(t, memfabric.Inject(p, memfabric.Faults{Dead: true}))
	}
	require.NoError(t, memfabric.Inject(domAddr(a, nic), memfabric.Faults{HoldWrites: true, ResetWrites: 1}))
	require.NoError(t, memfabric.Release(domAddr(a, nic)))
}

// TestPeerErrorOfGonePeerIsForGood: a completion that blames the peer,
// from a peer the provider's check finds gone, declares it gone for good
// at once: after the retry interval no write is let through to it (one
// would never complete), with no periodic check to tell.
func TestPeerErrorOfGonePeerIsForGood(t *testing.T) {
	a, b, src, desc := memPair(t, fabric.Config{LivenessInterval: -1, RequestTimeout: time.Minute})
	require.NoError(t, memfabric.Inject(domAddr(a, 0), memfabric.Faults{HoldWrites: true}))
	w := fabric.SingleWrite{Src: src, Length: 64, Dst: desc}
	tr := fabric.NewTransfer()
	require.NoError(t, a.SubmitSingle(w, fabric.Notify(tr)))
	waitPosted(t, a, 0, 1)
	failHeldWrite(t, a, 0, domAddr(b, 0))
	err := tr.Wait(waitCtx(t))
	require.ErrorIs(t, err, fabric.ErrPeerLost)
	require.ErrorIs(t, err, fabric.ErrProvider)

	time.Sleep(150 * time.Millisecond) // past the retry interval (100 ms at least)
	posted := a.Stats().Domains[0].Posted
	require.NoError(t, a.SubmitSingle(w, fabric.Notify(tr)))
	err = tr.Wait(waitCtx(t))
	require.ErrorIs(t, err, fabric.ErrPeerLost, "a write to a peer gone for good fails at once")
	require.ErrorIs(t, err, fabric.ErrProvider, "with the provider's evidence")
	require.Equal(t, posted, a.Stats().Domains[0].Posted, "and is not posted")
	require.ErrorIs(t, a.PeerStatus(desc.NICs[0].Addr), fabric.ErrPeerLost)
}

// TestGonePeerSweepsOtherNICs: a write split over two NICs whose first
// half fails because the target process died, while the second half's
// completion never comes: the target's second NIC address, to which
// nothing failed, is declared lost too, before the transfer's failure is
// reported, though periodic checks are off.
func TestGonePeerSweepsOtherNICs(t *testing.T) {
	a, b, src, desc := memPair(t, fabric.Config{NICs: 2, LivenessInterval: -1, RequestTimeout: time.Minute})
	require.Len(t, desc.NICs, 2)
	for nic := 0; nic < 2; nic++ {
		require.NoError(t, memfabric.Inject(domAddr(a, nic), memfabric.Faults{HoldWrites: true}))
	}
	tr := fabric.NewTransfer()
	require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 8192, Dst: desc}, fabric.Notify(tr)))
	waitPosted(t, a, 0, 1)
	waitPosted(t, a, 1, 1)
	failHeldWrite(t, a, 0, domAddr(b, 0), domAddr(b, 1))
	require.ErrorIs(t, tr.Wait(waitCtx(t)), fabric.ErrPeerLost)
	for nic, k := range desc.NICs {
		require.ErrorIs(t, a.PeerStatus(k.Addr), fabric.ErrPeerLost, "target NIC %d", nic)
	}
	require.EqualValues(t, 2, a.Stats().PeersLost)
	require.Eventually(t, func() bool { return a.Stats().Domains[1].InFlight == 0 }, 5*time.Second, time.Millisecond,
		"the held half, to a peer gone for good, is abandoned")
}

// peerLostHook is a log handler that calls fn when the engine logs that
// it declared a peer lost.
type peerLostHook struct{ fn func() }

func (h peerLostHook) Enabled(context.Context, slog.Level) bool { return true }
func (h peerLostHook) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h peerLostHook) WithGroup(string) slog.Handler            { return h }
func (h peerLostHook) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "ferry peer lost" {
		h.fn()
	}
	return nil
}

// TestPeerDeclaredBeforeFailureReported: a transfer that fails because
// its peer's connection broke is reported only after the peer was
// declared lost, so whoever sees the failure finds PeerStatus set.
func TestPeerDeclaredBeforeFailureReported(t *testing.T) {
	tc := new(fabric.TransferCounter)
	var doneAtLoss atomic.Int64
	doneAtLoss.Store(-1)
	log := slog.New(peerLostHook{fn: func() { doneAtLoss.Store(tc.Done()) }})
	a, _, src, desc := memPair(t, fabric.Config{LivenessInterval: -1, Logger: log})
	require.NoError(t, memfabric.Inject(domAddr(a, 0), memfabric.Faults{ResetWrites: 1}))
	require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 64, Dst: desc}, fabric.Count(tc)))
	require.NoError(t, tc.Wait(waitCtx(t), 1))
	require.EqualValues(t, 1, tc.Errors())
	require.ErrorIs(t, tc.Err(), fabric.ErrPeerLost)
	require.EqualValues(t, 0, doneAtLoss.Load(), "transfers reported when the peer was declared lost")
	require.ErrorIs(t, a.PeerStatus(desc.NICs[0].Addr), fabric.ErrPeerLost)
}

// TestAbandonedCompletionsStayLate: ops posted to a peer that is then
// found gone for good are abandoned while their context still waits to
// post the rest; their completions, coming back in the same poll, are
// counted late and leave the queue accounting alone.
func TestAbandonedCompletionsStayLate(t *testing.T) {
	a, b, src, desc := memPair(t, fabric.Config{QueueDepth: 2, LivenessInterval: -1, RequestTimeout: time.Minute})
	require.NoError(t, memfabric.Inject(domAddr(a, 0), memfabric.Faults{HoldWrites: true}))
	pages := []uint32{0, 1, 2, 3}
	tr := fabric.NewTransfer()
	require.NoError(t, a.SubmitPaged(fabric.PagedWrite{Src: src, SrcPages: pages, Dst: desc, DstPages: pages, Length: 64},
		fabric.Notify(tr)))
	waitPosted(t, a, 0, 2) // the queue depth: two pages wait to be posted
	failHeldWrite(t, a, 0, domAddr(b, 0))
	require.ErrorIs(t, tr.Wait(waitCtx(t)), fabric.ErrPeerLost)
	require.Eventually(t, func() bool { return a.Stats().Late == 1 }, 5*time.Second, time.Millisecond,
		"the second page's completion, after its op was abandoned")
	st := a.Stats()
	require.Zero(t, st.Domains[0].InFlight)
	require.EqualValues(t, 2, st.Domains[0].Posted)
}
