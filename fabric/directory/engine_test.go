package directory_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/directory"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// TestLoseOnLeave: an engine whose entry is Lost (or Closed) is declared
// lost in the engine that used it: its writes fail with a *PeerError
// whose cause says which.
func TestLoseOnLeave(t *testing.T) {
	testutil.LeakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func() *fabric.Engine {
		e, err := fabric.Open(ctx, fabric.Config{Transport: "mem", LivenessInterval: -1})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, e.Close(context.Background())) })
		return e
	}
	a, b, c := open(), open(), open()
	sbuf, err := fabric.AllocHost(4096)
	require.NoError(t, err)
	defer sbuf.Free()
	src, err := a.RegisterHost(sbuf, fabric.AccessLocal)
	require.NoError(t, err)
	descOf := func(e *fabric.Engine) fabric.Descriptor {
		buf, err := fabric.AllocHost(4096)
		require.NoError(t, err)
		t.Cleanup(func() { _ = buf.Free() })
		r, err := e.RegisterHost(buf, fabric.AccessRemoteWrite)
		require.NoError(t, err)
		d, err := r.Descriptor()
		require.NoError(t, err)
		return d
	}
	write := func(d fabric.Descriptor) error {
		tr := fabric.NewTransfer()
		if err := a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 64, Dst: d}, fabric.Notify(tr)); err != nil {
			return err
		}
		return tr.Wait(ctx)
	}
	db, dc := descOf(b), descOf(c)

	m := directory.NewMemory()
	defer m.Close()
	stop, err := directory.LoseOnLeave(ctx, m, a)
	require.NoError(t, err)
	defer stop()
	eb, err := directory.EntryOf(b, "b", nil)
	require.NoError(t, err)
	ec, err := directory.EntryOf(c, "c", nil)
	require.NoError(t, err)
	_, err = m.Publish(ctx, eb)
	require.NoError(t, err)
	pc, err := m.Publish(ctx, ec)
	require.NoError(t, err)
	require.NoError(t, write(db))
	require.NoError(t, write(dc))

	lost := make(chan *fabric.PeerError, 4)
	a.OnPeerLost(func(pe *fabric.PeerError) { lost <- pe })
	require.NoError(t, m.Expire("b"))
	pe := <-lost
	require.Equal(t, eb.Main(), pe.Peer)
	require.ErrorIs(t, pe, directory.ErrEntryLost)
	err = write(db)
	require.ErrorIs(t, err, fabric.ErrPeerLost)
	require.ErrorIs(t, err, directory.ErrEntryLost)

	require.NoError(t, pc.Close(ctx))
	pe = <-lost
	require.Equal(t, ec.Main(), pe.Peer)
	require.ErrorIs(t, pe, directory.ErrEntryClosed)
	require.ErrorIs(t, write(dc), directory.ErrEntryClosed)

	// a's own entry lapsing says nothing of its peers, even where a
	// writes to itself. z, expired after it, shows the event was handled.
	z := open()
	da, dz := descOf(a), descOf(z)
	require.NoError(t, write(da))
	require.NoError(t, write(dz))
	ea, err := directory.EntryOf(a, "a", nil)
	require.NoError(t, err)
	ez, err := directory.EntryOf(z, "z", nil)
	require.NoError(t, err)
	for _, e := range []directory.Entry{ea, ez} {
		_, err = m.Publish(ctx, e)
		require.NoError(t, err)
	}
	require.NoError(t, m.Expire("a"))
	require.NoError(t, m.Expire("z"))
	pe = <-lost
	require.Equal(t, ez.Main(), pe.Peer, "only z is declared lost")
	require.NoError(t, a.PeerStatus(ea.Main()))
	require.NoError(t, write(da))

	_, err = directory.LoseOnLeave(ctx, nil, a)
	require.ErrorIs(t, err, directory.ErrInvalid)
}
