package fabric_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/testutil"
	"github.com/ferryrdma/ferry/memfabric"
)

// TestCloseStuckWorker: a worker stuck inside a provider call cannot stop;
// Close still returns by its context's deadline with ErrAbandoned, fails
// the worker's transfers (ErrAbandoned), and wakes the counter and
// submitter waits on that engine (ErrClosed).
func TestCloseStuckWorker(t *testing.T) {
	src, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	dst, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	b, err := fabric.Open(context.Background(), fabric.Config{Transport: "mem"})
	require.NoError(t, err)
	defer b.Close(context.Background())
	before := testutil.SnapshotGoroutines() // a's worker starts after this
	a, err := fabric.Open(context.Background(), fabric.Config{Transport: "mem", MaxPending: 4, StuckTimeout: -1})
	require.NoError(t, err)
	sr, err := a.RegisterHost(src, fabric.AccessLocal)
	require.NoError(t, err)
	dr, err := b.RegisterHost(dst, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	desc, _ := dr.Descriptor()
	block := make(chan struct{})
	require.NoError(t, memfabric.Inject(nicAddr(a), memfabric.Faults{BlockPosts: block}))

	w := fabric.SingleWrite{Src: sr, Length: 64, Dst: desc}
	tr := fabric.NewTransfer()
	require.NoError(t, a.SubmitSingle(w, fabric.Notify(tr)))
	waited := make(chan error, 1)
	go func() { waited <- tr.Wait(context.Background()) }()
	ctr, err := a.ImmCounter(5)
	require.NoError(t, err)
	counted := make(chan error, 1)
	go func() { counted <- ctr.Wait(context.Background(), 1) }()
	// Fill the queue behind the stuck worker: this submitter blocks.
	var wg sync.WaitGroup
	submitErrs := make(chan error, 5000)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 5000; i++ {
			if err := a.SubmitSingle(w, fabric.Completion{}.WithDeadline(time.Time{})); err != nil {
				submitErrs <- err
				return
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)

	const closeTimeout = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	start := time.Now()
	err = a.Close(ctx)
	took := time.Since(start)
	require.ErrorIs(t, err, fabric.ErrAbandoned)
	require.Contains(t, err.Error(), "abandoned")
	// The worker stays stuck until the test ends: a Close that waited for
	// it would never return. The bound is the context's plus slack for a
	// loaded machine (4.5 s was seen there).
	require.Less(t, took, closeTimeout+10*time.Second, "Close honours its context")
	t.Logf("Close gave up after %v: %v", took, err)
	for name, ch := range map[string]chan error{"transfer wait": waited, "counter wait": counted} {
		want := fabric.ErrClosed
		if name == "transfer wait" {
			want = fabric.ErrAbandoned
		}
		select {
		case err := <-ch:
			require.ErrorIs(t, err, want, name)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s still blocked after Close", name)
		}
	}
	wg.Wait()
	require.ErrorIs(t, <-submitErrs, fabric.ErrClosed, "the blocked submitter was released")
	require.ErrorIs(t, a.Close(ctx), fabric.ErrAbandoned, "a second Close returns the first result")

	// Unstick it: the worker finishes on its own and tells nobody. The
	// memory registered with its domains may be freed only once it has
	// (it still writes from src to dst when let go): wait for every
	// goroutine a started to end, the worker's last.
	close(block)
	if err := before.Leaked(); err != nil {
		t.Fatalf("the abandoned worker went on once unstuck (its memory stays mapped): %v", err)
	}
	_ = src.Free()
	_ = dst.Free()
}

// TestBackPressure: with a peer that stops completing writes, a worker
// holds at most MaxPending transfers; its queue fills and a submitter
// waits until its request's deadline, then gets ErrQueueFull, or until its
// context ends. Room comes back when the writes complete.
func TestBackPressure(t *testing.T) {
	a, _, src, desc := memPair(t, fabric.Config{MaxPending: 8, RequestTimeout: time.Hour})
	require.NoError(t, memfabric.Inject(nicAddr(a), memfabric.Faults{HoldWrites: true}))
	w := fabric.SingleWrite{Src: src, Length: 64, Dst: desc}
	var accepted atomic.Int64
	const total = 20000
	filled := make(chan error, 1)
	go func() {
		for i := 0; i < total; i++ {
			if err := a.SubmitSingle(w, fabric.Completion{}); err != nil {
				filled <- err
				return
			}
			accepted.Add(1)
		}
		filled <- nil
	}()
	// The filler stops advancing once the worker holds 8 and the queue is full.
	last := int64(-1)
	for accepted.Load() != last {
		last = accepted.Load()
		time.Sleep(50 * time.Millisecond)
	}
	require.Less(t, last, int64(total), "submits never blocked")
	t.Logf("%d submits accepted before back-pressure", last)

	start := time.Now()
	err := a.SubmitSingle(w, fabric.Completion{}.WithDeadline(time.Now().Add(50*time.Millisecond)))
	require.ErrorIs(t, err, fabric.ErrQueueFull)
	require.Less(t, time.Since(start), 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() { res <- a.SubmitSingle(w, fabric.Completion{}.WithContext(ctx)) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-res:
		require.True(t, errors.Is(err, context.Canceled), "got %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("a submitter waiting for room ignored its context")
	}
	require.NoError(t, memfabric.Release(nicAddr(a)))
	select {
	case err := <-filled:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatalf("room never came back: %d of %d accepted", accepted.Load(), total)
	}
}

// TestWatchdogAbandonsStuckWorker: a worker inside one provider call for
// longer than StuckTimeout is given up on without waiting for Close: its
// transfers fail with ErrAbandoned on every kind of completion, new
// submits to it fail at once, and when the call returns at last the
// worker touches nothing and ends.
func TestWatchdogAbandonsStuckWorker(t *testing.T) {
	a, _, src, desc := memPair(t, fabric.Config{StuckTimeout: 100 * time.Millisecond})
	block := make(chan struct{})
	require.NoError(t, memfabric.Inject(nicAddr(a), memfabric.Faults{BlockPosts: block}))
	w := fabric.SingleWrite{Src: src, Length: 64, Dst: desc}
	tr := fabric.NewTransfer()
	tc := new(fabric.TransferCounter)
	fn := make(chan error, 1)
	require.NoError(t, a.SubmitSingle(w, fabric.Notify(tr)))
	require.NoError(t, a.SubmitSingle(w, fabric.Count(tc)))
	require.NoError(t, a.SubmitSingle(w, fabric.OnDone(func(err error) { fn <- err })))
	start := time.Now()
	require.ErrorIs(t, tr.Wait(waitCtx(t)), fabric.ErrAbandoned)
	require.NoError(t, tc.Wait(waitCtx(t), 1))
	require.ErrorIs(t, tc.Err(), fabric.ErrAbandoned)
	select {
	case err := <-fn:
		require.ErrorIs(t, err, fabric.ErrAbandoned)
	case <-time.After(5 * time.Second):
		t.Fatal("OnDone of a stuck worker's transfer never ran")
	}
	t.Logf("stuck worker given up on after %v", time.Since(start))
	require.ErrorIs(t, a.SubmitSingle(w, fabric.Completion{}), fabric.ErrAbandoned)
	close(block) // the call returns: the worker must end without touching its state
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	require.ErrorIs(t, a.Close(ctx), fabric.ErrAbandoned)
}

// TestWatchdogGonePeerExplainsStuckCall: a worker stuck inside a call
// while one of its peers is gone (shm spins on the lock of a peer that died
// holding it) is given up on after about a second, not StuckTimeout, and
// its writes to that peer fail with ErrPeerLost naming it.
func TestWatchdogGonePeerExplainsStuckCall(t *testing.T) {
	a, b, src, desc := memPair(t, fabric.Config{StuckTimeout: time.Minute, LivenessInterval: -1})
	tr := fabric.NewTransfer()
	require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 64, Dst: desc}, fabric.Notify(tr)))
	require.NoError(t, tr.Wait(waitCtx(t)))
	block := make(chan struct{})
	defer close(block)
	require.NoError(t, memfabric.Inject(nicAddr(a), memfabric.Faults{BlockPosts: block}))
	require.NoError(t, memfabric.Inject(nicAddr(b), memfabric.Faults{Dead: true}))
	start := time.Now()
	require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 64, Dst: desc}, fabric.Notify(tr)))
	err := tr.Wait(waitCtx(t))
	var pe *fabric.PeerError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, nicAddr(b), pe.Peer)
	took := time.Since(start)
	require.Less(t, took, 10*time.Second, "well before the one-minute StuckTimeout")
	t.Logf("stuck worker with a gone peer given up on after %v: %v", took, err)
	require.ErrorIs(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 64, Dst: desc}, fabric.Completion{}), fabric.ErrAbandoned)
}
