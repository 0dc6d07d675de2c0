package tests

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// TestIPCPeerClosedIsNotLost: an ipc peer whose engine closes is an
// orderly end: the writer's next write fails with a PeerError (its peer is
// unusable), and the log says "ferry peer closed" at debug level, never
// "ferry peer lost" (which is for peers that die or break).
func TestIPCPeerClosedIsNotLost(t *testing.T) {
	logs := &testutil.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := fabric.Open(ctx, fabric.Config{Transport: "ipc", Logger: logger, LogLevel: slog.LevelDebug})
	require.NoError(t, err)
	defer func() { require.NoError(t, a.Close(ctx)) }()
	b, err := fabric.Open(ctx, fabric.Config{Transport: "ipc"})
	require.NoError(t, err)

	src, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	defer src.Free()
	dst, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	defer dst.Free()
	sr, err := a.RegisterHost(src, fabric.AccessLocal)
	require.NoError(t, err)
	dr, err := b.RegisterHost(dst, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	desc, err := dr.Descriptor()
	require.NoError(t, err)
	write := func() error {
		tr := fabric.NewTransfer()
		if err := a.SubmitSingle(fabric.SingleWrite{Src: sr, Length: 1 << 20, Dst: desc}, fabric.Notify(tr)); err != nil {
			return err
		}
		return tr.Wait(ctx)
	}
	require.NoError(t, write())
	require.NoError(t, b.Close(ctx))

	var werr error
	for werr == nil {
		werr = write()
		time.Sleep(10 * time.Millisecond)
	}
	var pe *fabric.PeerError
	require.ErrorAs(t, werr, &pe, "a write to a closed peer")
	require.Equal(t, desc.NICs[0].Addr, pe.Peer)
	out := logs.String()
	require.Contains(t, out, "ferry peer closed")
	require.NotContains(t, out, "ferry peer lost")
	require.NotContains(t, out, "level=WARN")
}
