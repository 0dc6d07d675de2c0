package fabric_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/memfabric"
)

func nicAddr(e *fabric.Engine) fabric.Address { return e.Info().Groups[0].Domains[0].Address }

// TestPeerGoneFailsFast: writes to a peer that died end with ErrPeerLost
// naming it, well before their deadline; later writes to it fail without
// being posted; writes to another peer go on.
func TestPeerGoneFailsFast(t *testing.T) {
	cfg := fabric.Config{LivenessInterval: 20 * time.Millisecond, RequestTimeout: time.Minute}
	a, b, src, desc := memPair(t, cfg)
	_, _, _, other := memPair(t, cfg) // a second target, alive
	var lost atomic.Int32
	var lostPeer atomic.Value
	a.OnPeerLost(func(pe *fabric.PeerError) { lost.Add(1); lostPeer.Store(pe.Peer) })
	tc := new(fabric.TransferCounter)
	w := fabric.SingleWrite{Src: src, Length: 4096, Dst: desc}
	require.NoError(t, a.SubmitSingle(w, fabric.Count(tc)))
	require.NoError(t, tc.Wait(waitCtx(t), 1))
	require.Zero(t, tc.Errors())

	require.NoError(t, memfabric.Inject(nicAddr(b), memfabric.Faults{Dead: true}))
	start := time.Now()
	for i := 0; i < 5; i++ {
		require.NoError(t, a.SubmitSingle(w, fabric.Count(tc)))
	}
	require.NoError(t, tc.Wait(waitCtx(t), 6))
	took := time.Since(start)
	require.EqualValues(t, 5, tc.Errors())
	var pe *fabric.PeerError
	require.ErrorAs(t, tc.Err(), &pe)
	require.Equal(t, nicAddr(b), pe.Peer)
	require.Less(t, took, 10*time.Second, "lost peer noticed long before the one-minute deadline")
	t.Logf("5 writes to a dead peer failed after %v", took)
	require.ErrorIs(t, a.PeerStatus(nicAddr(b)), fabric.ErrPeerLost)
	require.Eventually(t, func() bool { return lost.Load() == 1 }, 5*time.Second, time.Millisecond)
	require.Equal(t, nicAddr(b), lostPeer.Load())

	posted := a.Stats().Domains[0].Posted
	tr := fabric.NewTransfer()
	require.NoError(t, a.SubmitSingle(w, fabric.Notify(tr)))
	require.ErrorIs(t, tr.Wait(waitCtx(t)), fabric.ErrPeerLost)
	require.Equal(t, posted, a.Stats().Domains[0].Posted, "a write to a peer gone for good is not posted")

	require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 4096, Dst: other}, fabric.Notify(tr)))
	require.NoError(t, tr.Wait(waitCtx(t)), "the engine keeps serving other peers")
	require.Nil(t, a.PeerStatus(nicAddr(a)))
}

// TestUnmatchedErrorChecksPeers: an error completion that names no
// operation makes the worker check its peers at once: transfers to the
// dead one fail with ErrPeerLost, though periodic checks are off.
func TestUnmatchedErrorChecksPeers(t *testing.T) {
	a, b, src, desc := memPair(t, fabric.Config{LivenessInterval: -1})
	require.NoError(t, memfabric.Inject(nicAddr(b), memfabric.Faults{Dead: true}))
	tr := fabric.NewTransfer()
	require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 64, Dst: desc}, fabric.Notify(tr)))
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, tr.Wait(short), fabric.ErrTimeout, "nothing notices the dead peer without a check")
	require.NoError(t, memfabric.Inject(nicAddr(a), memfabric.Faults{StrayErrors: 1}))
	require.ErrorIs(t, tr.Wait(waitCtx(t)), fabric.ErrPeerLost)
	st := a.Stats()
	require.EqualValues(t, 1, st.Unmatched)
	require.EqualValues(t, 1, st.PeersLost)
}

// TestPeerResetThenBack: a completion error that blames the connection
// declares the peer lost; new writes fail fast until the retry interval
// lets one through, whose success brings the peer back.
//
// The write meant to fail fast must come inside the retry interval, and a
// loaded machine can stall this test past it: an attempt where the write
// went through after such a stall proves nothing either way and is run
// again.
func TestPeerResetThenBack(t *testing.T) {
	const retry = 200 * time.Millisecond
	const attempts = 5
	for i := range attempts {
		stall := peerResetThenBack(t, retry)
		if stall == 0 {
			return
		}
		t.Logf("attempt %d: the write after the loss came %v after it (retry interval %v): again", i+1, stall, retry)
	}
	t.Fatalf("every one of %d attempts stalled past the retry interval", attempts)
}

// peerResetThenBack runs TestPeerResetThenBack once. It returns 0, or how
// late the write after the loss was when that let it through.
func peerResetThenBack(t *testing.T, retry time.Duration) time.Duration {
	a, _, src, desc := memPair(t, fabric.Config{LivenessInterval: retry})
	require.NoError(t, memfabric.Inject(nicAddr(a), memfabric.Faults{ResetWrites: 1}))
	w := fabric.SingleWrite{Src: src, Length: 64, Dst: desc}
	tr := fabric.NewTransfer()
	// The loss is declared after this, and the retry interval runs from
	// the worker's clock reading of the pass that declares it. Half the
	// interval since start is taken as maybe past it: that pass may have
	// read its clock a little before start.
	start := time.Now()
	require.NoError(t, a.SubmitSingle(w, fabric.Notify(tr)))
	err := tr.Wait(waitCtx(t))
	require.ErrorIs(t, err, fabric.ErrPeerLost)
	require.ErrorIs(t, err, fabric.ErrProvider, "the provider's evidence is kept")
	require.NoError(t, a.SubmitSingle(w, fabric.Notify(tr)))
	err = tr.Wait(waitCtx(t))
	if d := time.Since(start); err == nil && d >= retry/2 {
		return d
	}
	require.ErrorIs(t, err, fabric.ErrPeerLost, "fails fast inside the retry interval")
	require.Eventually(t, func() bool {
		if err := a.SubmitSingle(w, fabric.Notify(tr)); err != nil {
			return false
		}
		return tr.Wait(waitCtx(t)) == nil
	}, 5*time.Second, 20*time.Millisecond, "a write goes through after the retry interval")
	require.Nil(t, a.PeerStatus(desc.NICs[0].Addr), "the peer is back")
	return 0
}

// TestCounterWatchPeer: a receiver waiting for a peer's immediates hears
// that the peer died, through a watch, with no traffic to it.
func TestCounterWatchPeer(t *testing.T) {
	a, b, _, _ := memPair(t, fabric.Config{LivenessInterval: 20 * time.Millisecond})
	ctr, err := b.ImmCounter(9)
	require.NoError(t, err)
	stop, err := ctr.Watch(a.MainAddress())
	require.NoError(t, err)
	defer stop()
	res := make(chan error, 1)
	go func() { res <- ctr.Wait(waitCtx(t), 1) }()
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, memfabric.Inject(nicAddr(a), memfabric.Faults{Dead: true}))
	select {
	case err := <-res:
		var pe *fabric.PeerError
		require.True(t, errors.As(err, &pe), "got %v", err)
		require.Equal(t, a.MainAddress(), pe.Peer)
	case <-time.After(5 * time.Second):
		t.Fatal("wait on a dead peer's immediates did not end")
	}
	require.EqualValues(t, 0, ctr.Count(), "credits given back")
	_, err = b.WatchPeer(fabric.Address{})
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)
}

// TestOldSuccessIsNoEvidence: an op taken before its peer was declared
// lost that completes successfully afterwards (its bytes left before the
// connection broke) does not bring the peer back: a two-page write whose
// first page's completion reports a reset connection, and whose second
// page then completes, leaves the peer lost.
func TestOldSuccessIsNoEvidence(t *testing.T) {
	a, _, src, desc := memPair(t, fabric.Config{LivenessInterval: -1, RequestTimeout: time.Minute})
	require.NoError(t, memfabric.Inject(nicAddr(a), memfabric.Faults{ResetWrites: 1}))
	tr := fabric.NewTransfer()
	pages := []uint32{0, 1}
	require.NoError(t, a.SubmitPaged(fabric.PagedWrite{Src: src, SrcPages: pages, Dst: desc, DstPages: pages, Length: 64},
		fabric.Notify(tr)))
	require.ErrorIs(t, tr.Wait(waitCtx(t)), fabric.ErrPeerLost)
	require.ErrorIs(t, a.PeerStatus(desc.NICs[0].Addr), fabric.ErrPeerLost,
		"the second page's success, taken before the loss, brought the peer back")
}

// TestHeartbeatLateBehindTraffic: a heartbeat that stays unanswered past
// the handshake timeout while other writes to the same peer keep
// completing (on an RC queue, behind a long backlog) does not make the
// peer lost; once nothing completes for the timeout, it does.
//
// The engine rightly declares the peer lost when nothing completed for the
// timeout, and a loaded machine can stall this test's goroutine (or the
// worker) for that long between two writes: an attempt where a loss
// follows such a stall proves nothing either way and is run again, with
// the timeout doubled. A loss while the writes came closer together than
// the timeout fails at once.
func TestHeartbeatLateBehindTraffic(t *testing.T) {
	const attempts = 5
	timeout := 200 * time.Millisecond
	for i := range attempts {
		stall := heartbeatLateBehindTraffic(t, timeout)
		if stall == 0 {
			return
		}
		t.Logf("attempt %d: the peer was lost after the machine stalled the writes for %v (timeout %v): again", i+1, stall, timeout)
		timeout *= 2
	}
	t.Fatalf("every one of %d attempts stalled for over its timeout between two writes (the last %v)", attempts, timeout/2)
}

// heartbeatLateBehindTraffic runs TestHeartbeatLateBehindTraffic once. It
// returns 0, or how long the writes stalled when the peer was lost after
// they stalled for the timeout.
func heartbeatLateBehindTraffic(t *testing.T, timeout time.Duration) time.Duration {
	a, b, src, desc := memPair(t, fabric.Config{LivenessInterval: 10 * time.Millisecond, HandshakeTimeout: timeout,
		RequestTimeout: time.Minute})
	require.NoError(t, memfabric.Inject(nicAddr(a), memfabric.Faults{Heartbeats: true, HoldHeartbeats: true}))
	t.Cleanup(func() { _ = memfabric.Release(nicAddr(a)) }) // before the engines close
	lost := make(chan *fabric.PeerError, 4)
	a.OnPeerLost(func(pe *fabric.PeerError) {
		select {
		case lost <- pe:
		default: // only the first loss is looked at
		}
	})
	// newer and older are when the latest completed write and the one
	// before it were submitted (at first, a time before the heartbeat
	// was posted). The worker dates the peer's last answer, newer's
	// completion, by its clock reading at the start of the pass that
	// polled it: after older's submission, though maybe before newer's
	// when the worker stalled within that pass. So a loss is explained by
	// the machine only once the timeout has passed since older.
	older := time.Now()
	newer := older
	stalled := func() time.Duration {
		if d := time.Since(older); d > timeout {
			return d
		}
		return 0
	}
	stop, err := a.WatchPeer(nicAddr(b))
	require.NoError(t, err)
	defer stop()

	w := fabric.SingleWrite{Src: src, Length: 256, Dst: desc}
	tr := fabric.NewTransfer()
	for end := time.Now().Add(5 * timeout); time.Now().Before(end); {
		sent := time.Now()
		require.NoError(t, a.SubmitSingle(w, fabric.Notify(tr)))
		if err := tr.Wait(waitCtx(t)); err != nil {
			// The peer's last answer was the write before this one.
			if d := stalled(); d > 0 && errors.Is(err, fabric.ErrPeerLost) {
				return d
			}
			require.NoError(t, err)
		}
		older, newer = newer, sent
		time.Sleep(timeout / 10)
		if err := a.PeerStatus(nicAddr(b)); err != nil {
			if d := stalled(); d > 0 {
				return d
			}
			require.Nil(t, err, "a peer whose writes complete declared lost over a late heartbeat (last two writes %v and %v ago)",
				time.Since(older), time.Since(newer))
		}
	}
	select {
	case pe := <-lost:
		require.Equal(t, nicAddr(b), pe.Peer)
		require.ErrorIs(t, pe, fabric.ErrTimeout, "lost over the unanswered heartbeat")
		// Measured from the last write's submission, which its
		// completion (the peer's last answer) follows; the quarter
		// spared covers a worker stalled within the pass that took it.
		took := time.Since(newer)
		require.GreaterOrEqual(t, took, timeout*3/4, "lost only after about the timeout without any completion")
		t.Logf("declared lost %v after its last write was submitted: %v", took, pe)
	case <-time.After(20 * time.Second):
		t.Fatal("an unanswered heartbeat with no traffic never made the peer lost")
	}
	return 0
}

// TestHeartbeatsAnswered: watched peers whose heartbeats complete stay
// reachable.
func TestHeartbeatsAnswered(t *testing.T) {
	a, b, _, _ := memPair(t, fabric.Config{LivenessInterval: 10 * time.Millisecond, HandshakeTimeout: 100 * time.Millisecond})
	require.NoError(t, memfabric.Inject(nicAddr(a), memfabric.Faults{Heartbeats: true}))
	stop, err := a.WatchPeer(nicAddr(b))
	require.NoError(t, err)
	defer stop()
	before := a.Stats().Domains[0].Completions
	time.Sleep(500 * time.Millisecond)
	require.Nil(t, a.PeerStatus(nicAddr(b)))
	n := a.Stats().Domains[0].Completions - before
	require.Greater(t, n, uint64(5), "heartbeats completed")
	t.Logf("%d heartbeats completed in 500 ms", n)
}
