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

// memPair opens a writer and a target on the mem provider with cfg, a
// registered 1 MiB source on the writer and the target's descriptor.
func memPair(t *testing.T, cfg fabric.Config) (a, b *fabric.Engine, src *fabric.MemoryRegion, desc fabric.Descriptor) {
	t.Helper()
	cfg.Transport = "mem"
	open := func() *fabric.Engine {
		e, err := fabric.Open(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := e.Close(ctx); !errors.Is(err, fabric.ErrAbandoned) {
				// Tests that abandon a worker check Close themselves.
				require.NoError(t, err)
			}
		})
		return e
	}
	sbuf, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	dbuf, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sbuf.Free(); _ = dbuf.Free() })
	a, b = open(), open()
	src, err = a.RegisterHost(sbuf, fabric.AccessLocal)
	require.NoError(t, err)
	dr, err := b.RegisterHost(dbuf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	desc, err = dr.Descriptor()
	require.NoError(t, err)
	return a, b, src, desc
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestDeadlineFencesHeldOps: a write whose completion never comes fails at
// its deadline with ErrTimeout, exactly once; the handle is reusable at
// once; when the held completion finally arrives it changes nothing, and
// the region it used could not be unregistered before it did.
func TestDeadlineFencesHeldOps(t *testing.T) {
	a, _, src, desc := memPair(t, fabric.Config{})
	nic := a.Info().Groups[0].Domains[0].Address
	require.NoError(t, memfabric.Inject(nic, memfabric.Faults{HoldWrites: true}))

	var calls atomic.Int32
	got := make(chan error, 4)
	start := time.Now()
	c := fabric.OnDone(func(err error) { calls.Add(1); got <- err }).WithDeadline(time.Now().Add(50 * time.Millisecond))
	require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 4096, Dst: desc}, c))
	err := <-got
	require.ErrorIs(t, err, fabric.ErrTimeout)
	require.Less(t, time.Since(start), 5*time.Second)
	require.EqualValues(t, 1, a.Stats().Expired)

	// The handle of an expired transfer is free again at once.
	tr := fabric.NewTransfer()
	require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 8, Dst: desc}, fabric.Notify(tr).WithDeadline(time.Now().Add(20*time.Millisecond))))
	require.ErrorIs(t, tr.Wait(waitCtx(t)), fabric.ErrTimeout)

	// Unregister waits for the fenced ops: the provider may still read
	// the memory until they complete.
	unreg := make(chan error, 1)
	go func() { unreg <- a.Unregister(src) }()
	select {
	case err := <-unreg:
		t.Fatalf("Unregister returned (%v) while the provider held two writes from the region", err)
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, memfabric.Release(nic))
	select {
	case err := <-unreg:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Unregister still blocked after the held completions came back")
	}
	time.Sleep(20 * time.Millisecond)
	require.EqualValues(t, 1, calls.Load(), "the late completion was reported again")
	require.EqualValues(t, 2, a.Stats().Failed)
}

// TestDeadlineDefaultAndContext: Config.RequestTimeout applies to a plain
// completion; WithContext takes the context's deadline and its
// cancellation; a zero deadline turns deadlines off.
func TestDeadlineDefaultAndContext(t *testing.T) {
	a, _, src, desc := memPair(t, fabric.Config{RequestTimeout: 30 * time.Millisecond})
	nic := a.Info().Groups[0].Domains[0].Address
	require.NoError(t, memfabric.Inject(nic, memfabric.Faults{HoldWrites: true}))
	w := fabric.SingleWrite{Src: src, Length: 64, Dst: desc}

	tr := fabric.NewTransfer()
	require.NoError(t, a.SubmitSingle(w, fabric.Notify(tr)))
	require.ErrorIs(t, tr.Wait(waitCtx(t)), fabric.ErrTimeout, "engine default")

	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, a.SubmitSingle(w, fabric.Notify(tr).WithContext(ctx).WithDeadline(time.Time{})))
	cancel()
	err := tr.Wait(waitCtx(t))
	require.ErrorIs(t, err, context.Canceled, "a cancelled context fails the transfer")
	require.False(t, errors.Is(err, fabric.ErrTimeout))

	dctx, dcancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
	defer dcancel()
	require.NoError(t, a.SubmitSingle(w, fabric.Notify(tr).WithContext(dctx)))
	require.ErrorIs(t, tr.Wait(waitCtx(t)), fabric.ErrTimeout, "the context's deadline")

	// No deadline: still running after several default timeouts.
	require.NoError(t, a.SubmitSingle(w, fabric.Notify(tr).WithDeadline(time.Time{})))
	short, scancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer scancel()
	require.ErrorIs(t, tr.Wait(short), fabric.ErrTimeout, "the wait ends, not the transfer")
	require.NoError(t, memfabric.Release(nic))
	require.NoError(t, tr.Wait(waitCtx(t)), "the transfer without a deadline completes once released")
}

// TestDeadlineDropsQueuedOps: ops still queued behind a full provider
// queue when their transfers expire are never posted.
func TestDeadlineDropsQueuedOps(t *testing.T) {
	a, _, src, desc := memPair(t, fabric.Config{QueueDepth: 4, RequestTimeout: 50 * time.Millisecond})
	nic := a.Info().Groups[0].Domains[0].Address
	require.NoError(t, memfabric.Inject(nic, memfabric.Faults{HoldWrites: true}))
	tc := new(fabric.TransferCounter)
	idx := make([]uint32, 64)
	for i := range idx {
		idx[i] = uint32(i)
	}
	for i := 0; i < 10; i++ {
		require.NoError(t, a.SubmitPaged(fabric.PagedWrite{Src: src, SrcPages: idx, SrcStride: 64, Dst: desc, DstPages: idx,
			DstStride: 64, Length: 64}, fabric.Count(tc)))
	}
	require.NoError(t, tc.Wait(waitCtx(t), 10))
	require.EqualValues(t, 10, tc.Errors())
	require.ErrorIs(t, tc.Err(), fabric.ErrTimeout)
	require.EqualValues(t, 4, a.Stats().Domains[0].Posted, "only the queue depth was ever posted")
	require.NoError(t, memfabric.Release(nic))
	// The engine goes on: a fresh write completes.
	tr := fabric.NewTransfer()
	require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 64, Dst: desc}, fabric.Notify(tr)))
	require.NoError(t, tr.Wait(waitCtx(t)))
}
