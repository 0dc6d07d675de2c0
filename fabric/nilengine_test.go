package fabric_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// TestNilEngine: the result of a failed Open used anyway answers every
// call with an error matching ErrClosed (or a zero value), never a panic.
func TestNilEngine(t *testing.T) {
	e, err := fabric.Open(context.Background(), fabric.Config{Transport: "no-such-transport"})
	require.ErrorIs(t, err, fabric.ErrUnknownProvider)
	require.Nil(t, e)
	ctx := context.Background()
	var d fabric.Descriptor
	require.ErrorIs(t, e.SubmitImm(fabric.ImmWrite{Dst: d}, fabric.Completion{}), fabric.ErrClosed)
	require.ErrorIs(t, e.SubmitBarrier(fabric.Barrier{}, fabric.Completion{}), fabric.ErrClosed)
	require.ErrorIs(t, e.SubmitSingle(fabric.SingleWrite{}, fabric.Completion{}), fabric.ErrClosed)
	require.ErrorIs(t, e.SubmitPaged(fabric.PagedWrite{}, fabric.Completion{}), fabric.ErrClosed)
	require.ErrorIs(t, e.SubmitScatter(fabric.ScatterWrite{}, fabric.Completion{}), fabric.ErrClosed)
	require.ErrorIs(t, e.Send(ctx, fabric.Address{}, []byte{1}, fabric.Completion{}), fabric.ErrClosed)
	require.ErrorIs(t, e.PostRecv(nil, 0, 1, func(int) {}, func(error) {}), fabric.ErrClosed)
	require.ErrorIs(t, e.BouncingRecvs(1, 64, func([]byte) {}, func(error) {}), fabric.ErrClosed)
	_, err = e.Register(fabric.MemorySpan{}, fabric.AccessLocal)
	require.ErrorIs(t, err, fabric.ErrClosed)
	_, err = e.RegisterHost(nil, fabric.AccessLocal)
	require.ErrorIs(t, err, fabric.ErrClosed)
	require.ErrorIs(t, e.Unregister(nil), fabric.ErrClosed)
	_, err = e.ImmCounter(1)
	require.ErrorIs(t, err, fabric.ErrClosed)
	_, err = e.FlagCounter(1, &fabric.HostFlag{})
	require.ErrorIs(t, err, fabric.ErrClosed)
	_, _, err = e.ExpectImm(1, 1, func() bool { return false })
	require.ErrorIs(t, err, fabric.ErrClosed)
	_, had := e.RemoveImmCount(1)
	require.False(t, had)
	_, err = e.AddPeerGroup(fabric.HostDevice, nil)
	require.ErrorIs(t, err, fabric.ErrClosed)
	e.OnImm(func(uint32) {})
	require.Zero(t, e.NICs())
	require.Zero(t, e.Regions())
	require.True(t, e.MainAddress().IsZero())
	require.Equal(t, fabric.Stats{}, e.Stats())
	_ = e.Info()
	_ = e.MainDevice()
	require.ErrorIs(t, e.PeerStatus(fabric.Address{}), fabric.ErrClosed)
	_, err = e.WatchPeer(fabric.Address{})
	require.ErrorIs(t, err, fabric.ErrClosed)
	e.OnPeerLost(func(*fabric.PeerError) {})
	require.Empty(t, e.LostPeers())
	require.ErrorIs(t, e.Close(ctx), fabric.ErrClosed)
}
