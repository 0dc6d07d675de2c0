package fabric_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

var errFromOutside = errors.New("entry expired in the directory")

// TestDeclarePeerLost: a peer declared lost from outside (a directory
// whose entry for it expired) fails new work fast with a *PeerError that
// carries the outside cause, shows in PeerStatus and OnPeerLost, and comes
// back once a write let through as a probe completes (the peer was alive).
func TestDeclarePeerLost(t *testing.T) {
	a, _, src, desc := memPair(t, fabric.Config{LivenessInterval: -1})
	w := fabric.SingleWrite{Src: src, Length: 64, Dst: desc}
	peer := desc.NICs[0].Addr

	// A peer this engine never used is left alone.
	require.NoError(t, a.DeclarePeerLost(peer, errFromOutside))
	require.NoError(t, a.PeerStatus(peer))

	tr := fabric.NewTransfer()
	require.NoError(t, a.SubmitSingle(w, fabric.Notify(tr)))
	require.NoError(t, tr.Wait(waitCtx(t)))

	lost := make(chan *fabric.PeerError, 4)
	a.OnPeerLost(func(pe *fabric.PeerError) { lost <- pe })
	require.NoError(t, a.DeclarePeerLost(peer, errFromOutside))
	pe := <-lost
	require.Equal(t, peer, pe.Peer)
	require.ErrorIs(t, pe, errFromOutside)
	require.ErrorIs(t, a.PeerStatus(peer), fabric.ErrPeerLost)

	require.NoError(t, a.SubmitSingle(w, fabric.Notify(tr)))
	err := tr.Wait(waitCtx(t))
	var got *fabric.PeerError
	require.ErrorAs(t, err, &got, "new work to a peer declared lost fails fast")
	require.ErrorIs(t, err, errFromOutside)

	// After the retry interval one write goes through as a probe; the
	// peer is alive, so it completes and the loss clears.
	require.Eventually(t, func() bool {
		tr := fabric.NewTransfer()
		if err := a.SubmitSingle(w, fabric.Notify(tr)); err != nil {
			return false
		}
		return tr.Wait(waitCtx(t)) == nil
	}, 10*time.Second, 50*time.Millisecond)
	require.NoError(t, a.PeerStatus(peer))

	require.ErrorIs(t, a.DeclarePeerLost(fabric.Address{}, errFromOutside), fabric.ErrInvalidArgument)
	require.ErrorIs(t, a.DeclarePeerLost(peer, nil), fabric.ErrInvalidArgument)
	var nilEngine *fabric.Engine
	require.ErrorIs(t, nilEngine.DeclarePeerLost(peer, errFromOutside), fabric.ErrClosed)
}
