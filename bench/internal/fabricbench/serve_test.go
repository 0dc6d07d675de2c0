package fabricbench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/memfabric"
)

// TestServeClientsApart: a client whose case runs long, and one that stops
// answering, do not hold up another client: it is greeted and served at
// once; the long case ends at the server's case deadline with a timeout,
// and the dead client's at once with its peer lost.
func TestServeClientsApart(t *testing.T) {
	ctx := testCtx(t)
	sspec := smallSpec("mem", 1)
	sspec.Timeout = time.Second // the server's case deadline
	server, err := OpenSide(ctx, sspec.WithDefaults())
	require.NoError(t, err)
	defer server.Close()
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	var log lockedWriter
	log.w = &testLog{t: t}
	go func() { served <- Serve(sctx, server, &log) }()
	defer func() { stop(); <-served }()

	dial := func() (*Side, *Client) {
		s, err := OpenSide(ctx, smallSpec("mem", 1).WithDefaults())
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		c, err := Dial(ctx, s, server.Engine.MainAddress())
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return s, c
	}
	_, long := dial()
	deadSide, dead := dial()
	_, other := dial()

	// A case of a few million immediate writes: far longer than the
	// server's one-second case deadline.
	longSpec := smallSpec("mem", 1)
	longSpec.Workloads, longSpec.Iters, longSpec.Verify = []string{Imm}, 5_000_000, false
	longSpec.Timeout = 30 * time.Second
	longDone := make(chan error, 1)
	go func() {
		_, err := long.Run(ctx, longSpec, nil)
		longDone <- err
	}()
	// A client that dies under its case: its writes stop completing (it
	// waits for the reply only two seconds).
	deadDone := make(chan error, 1)
	go func() {
		spec := longSpec
		spec.Timeout = 2 * time.Second
		_, err := dead.Run(ctx, spec, nil)
		deadDone <- err
	}()
	time.Sleep(100 * time.Millisecond)
	require.NoError(t, memfabric.Inject(deadSide.Engine.Info().Groups[0].Domains[0].Address, memfabric.Faults{Dead: true}))

	start := time.Now()
	rep, err := other.Run(ctx, smallSpec("mem", 1), nil)
	require.NoError(t, err)
	require.False(t, rep.Failed())
	require.Less(t, time.Since(start), 900*time.Millisecond, "served while the other clients' cases ran")

	select {
	case err := <-longDone:
		require.ErrorIs(t, err, ErrRemote)
		require.Contains(t, err.Error(), "timed out")
	case <-time.After(20 * time.Second):
		t.Fatal("the long case outlived the server's case deadline")
	}
	select {
	case err := <-deadDone:
		require.ErrorIs(t, err, fabric.ErrTimeout, "the dead client hears nothing back")
	case <-time.After(20 * time.Second):
		t.Fatal("the dead client's case never ended")
	}
}

// testLog writes the server's lines to the test log.
type testLog struct{ t *testing.T }

func (l *testLog) Write(b []byte) (int, error) { l.t.Logf("server: %s", b); return len(b), nil }

// TestLoopbackEndsOnLostClient: in loopback, a server that declares the
// client lost cannot send its reply (it goes to the lost peer): the
// client stops waiting as soon as the server's engine holds it lost, with
// the PeerError, instead of at the case timeout (a minute here).
func TestLoopbackEndsOnLostClient(t *testing.T) {
	ctx := testCtx(t)
	spec := smallSpec("mem", 1)
	// The server's send to the dead client stays with the provider: the
	// close gives up on it at this deadline.
	spec.CloseTimeout = 2 * time.Second
	spec.OnEngine = func(e *fabric.Engine, role string) {
		if role == "client" {
			// Writes and sends to the client never complete, and the
			// server's liveness checks find it gone.
			require.NoError(t, memfabric.Inject(e.Info().Groups[0].Domains[0].Address, memfabric.Faults{Dead: true}))
		}
	}
	_, err := Loopback(ctx, spec, nil)
	require.ErrorIs(t, err, fabric.ErrPeerLost, "the run ends on the lost peer")
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "the server lost this client")
}
