package fabrictest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/memfabric"
)

// testCompletions: callbacks, handles and counters each report exactly
// once; on the mem provider an injected error completion reaches its
// transfer once, and later transfers are unaffected.
func testCompletions(t *testing.T, p Params) {
	env := NewEnv(t, p)
	var calls atomic.Int32
	done := make(chan error, 1)
	require.NoError(t, env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, Length: 100000, Dst: env.Desc},
		fabric.OnDone(func(err error) { calls.Add(1); done <- err })))
	require.NoError(t, <-done)
	tr := fabric.NewTransfer()
	require.NoError(t, env.A.SubmitImm(fabric.ImmWrite{Imm: 1, Dst: env.Desc}, fabric.Notify(tr)))
	require.ErrorIs(t, env.A.SubmitImm(fabric.ImmWrite{Imm: 1, Dst: env.Desc}, fabric.Notify(tr)), fabric.ErrBusy)
	require.NoError(t, tr.Wait(Ctx(t)))
	require.EqualValues(t, 1, calls.Load())

	if p.Transport != "mem" {
		return
	}
	addr := env.A.Info().Groups[0].Domains[0].Address
	require.NoError(t, memfabric.Inject(addr, memfabric.Faults{FailWrites: 1, Errno: 5}))
	idx := []uint32{0, 1, 2, 3, 4, 5, 6, 7}
	var errs []error
	var mu sync.Mutex
	fin := make(chan struct{})
	require.NoError(t, env.A.SubmitPaged(fabric.PagedWrite{Src: env.SrcReg, SrcPages: idx, SrcStride: 64,
		Dst: env.Desc, DstPages: idx, DstStride: 64, Length: 64},
		fabric.OnDone(func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock(); close(fin) })))
	<-fin
	Settle()
	mu.Lock()
	require.Len(t, errs, 1, "an error is reported exactly once")
	require.ErrorIs(t, errs[0], fabric.ErrProvider)
	mu.Unlock()
	require.NoError(t, Wait(t, func(c fabric.Completion) error {
		return env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, Length: 10, Dst: env.Desc}, c)
	}))
	tc := new(fabric.TransferCounter)
	require.NoError(t, memfabric.Inject(addr, memfabric.Faults{FailWrites: 1}))
	require.NoError(t, env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, Length: 10, Dst: env.Desc, Route: fabric.Pinned(0)}, fabric.Count(tc)))
	require.NoError(t, tc.Wait(Ctx(t), 1))
	require.EqualValues(t, 1, tc.Errors())
	require.ErrorIs(t, tc.Err(), fabric.ErrProvider, "the counter keeps its first error")
	// A post the provider refuses for good fails its transfer.
	require.NoError(t, memfabric.Inject(addr, memfabric.Faults{RefusePosts: 1}))
	err := Wait(t, func(c fabric.Completion) error {
		return env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, Length: 10, Dst: env.Desc, Route: fabric.Pinned(0)}, c)
	})
	require.ErrorIs(t, err, fabric.ErrProvider)
	require.NotZero(t, env.A.Stats().Failed)
}

// testSendRecv: bouncing and persistent receives, ordered messages of many
// sizes, and the size limit.
func testSendRecv(t *testing.T, p Params) {
	env := NewEnv(t, p)
	got := make(chan []byte, 64)
	require.NoError(t, env.B.BouncingRecvs(8, 4096, func(b []byte) { got <- b }, func(err error) {
		if err != nil && !errors.Is(err, fabric.ErrClosed) {
			t.Errorf("bouncing recv: %v", err)
		}
	}))
	to := env.B.MainAddress()
	want := map[string]bool{}
	for i := 0; i < 20; i++ {
		msg := bytes.Repeat([]byte{byte(i)}, 1+i*150)
		want[string(msg)] = true
		require.NoError(t, Wait(t, func(c fabric.Completion) error { return env.A.Send(Ctx(t), to, msg, c) }))
	}
	for i := 0; i < 20; i++ {
		select {
		case m := <-got:
			require.True(t, want[string(m)], "unexpected message of %d bytes", len(m))
			delete(want, string(m))
		case <-time.After(Timeout):
			t.Fatalf("received %d of 20 messages", i)
		}
	}
	require.ErrorIs(t, env.A.Send(Ctx(t), to, make([]byte, 1<<20), fabric.Completion{}), fabric.ErrTooLarge)
	require.ErrorIs(t, env.A.Send(Ctx(t), fabric.Address{}, []byte{1}, fabric.Completion{}), fabric.ErrInvalidArgument)

	// Persistent receive into a caller's region on A, re-posted after each callback.
	buf := env.Aux
	reg, err := env.A.RegisterHost(buf, fabric.AccessLocal)
	require.NoError(t, err)
	lens := make(chan int, 8)
	require.NoError(t, env.A.PostRecv(reg, 0, 4096, func(n int) {
		lens <- n
		if buf.Bytes()[0] != byte(n) {
			t.Errorf("persistent recv: first byte %d for length %d", buf.Bytes()[0], n)
		}
	}, nil))
	for i := 1; i <= 3; i++ {
		require.NoError(t, Wait(t, func(c fabric.Completion) error {
			return env.B.Send(Ctx(t), env.A.MainAddress(), bytes.Repeat([]byte{byte(i * 10)}, i*10), c)
		}))
		select {
		case n := <-lens:
			require.Equal(t, i*10, n)
		case <-time.After(Timeout):
			t.Fatal("persistent receive did not complete")
		}
	}
}

// testUnregisterAfterSubmit: writes whose Submit returned before
// Unregister was called finish (they were accepted); Unregister returns
// once they have, and only later submits are refused.
func testUnregisterAfterSubmit(t *testing.T, p Params) {
	env := NewEnv(t, p)
	reg, err := env.A.RegisterHost(env.Src, fabric.AccessLocal)
	require.NoError(t, err)
	const n = 200
	landed, err := env.B.ImmCounter(0x4242)
	require.NoError(t, err)
	var done, failed atomic.Int32
	var firstErr atomic.Value
	for i := 0; i < n; i++ {
		off := uint64(i%64) * 16384
		require.NoError(t, env.A.SubmitSingle(fabric.SingleWrite{Src: reg, SrcOffset: off, Length: 16384, Dst: env.Desc, DstOffset: off,
			Imm: fabric.Immediate(0x4242)},
			fabric.OnDone(func(err error) {
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
				done.Add(1)
			})))
	}
	require.NoError(t, env.A.Unregister(reg))
	// Unregister waited for the writes it let finish; their callbacks run
	// on the dispatcher shortly after.
	deadline := time.Now().Add(Timeout)
	for done.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.EqualValues(t, n, done.Load(), "every accepted write reported")
	require.Zero(t, failed.Load(), "accepted writes failed by Unregister: first error %v", firstErr.Load())
	require.ErrorIs(t, env.A.SubmitSingle(fabric.SingleWrite{Src: reg, Length: 8, Dst: env.Desc}, fabric.Completion{}), fabric.ErrUnknownRegion)
	require.ErrorIs(t, env.A.Unregister(reg), fabric.ErrUnknownRegion)
	// One immediate per shard: the bytes are visible once all arrived.
	require.NoError(t, landed.Wait(Ctx(t), int64(n*p.NICs)))
	require.Equal(t, env.Src.Bytes()[:64*16384], env.Dst.Bytes()[:64*16384])
}

// testClose: Close fails what is pending with ErrClosed, reports every
// transfer exactly once, leaks no goroutine, and every later call fails
// with ErrClosed.
func testClose(t *testing.T, p Params) {
	if p.Transport == "shm" {
		// libfabric 1.17's shm hands a peer endpoint of the same process
		// its region directly instead of mapping a copy, so closing one of
		// two in-process endpoints right after traffic can crash the
		// other's progress inside libfabric; 2.1 still does (a SIGSEGV in
		// the other endpoint's fi_cq_read, 1 run in 5 here, 2 in 5 on
		// 1.17). Across processes each side maps its own copy: tests/
		// closes shm engines under traffic there.
		t.Skip("shm: in-process close under traffic faults inside libfabric (1.17 and 2.1); covered across processes in tests/")
	}
	goroutines := testutil.SnapshotGoroutines()
	func() {
		a := openRaw(t, p)
		b := openRaw(t, p)
		src, _ := fabric.AllocHost(1 << 20)
		dst, _ := fabric.AllocHost(1 << 20)
		defer src.Free()
		defer dst.Free()
		sr, err := a.RegisterHost(src, fabric.AccessLocal)
		require.NoError(t, err)
		dr, err := b.RegisterHost(dst, fabric.AccessRemoteWrite)
		require.NoError(t, err)
		desc, _ := dr.Descriptor()
		var calls, fails atomic.Int32
		const n = 200
		idx := make([]uint32, 64)
		for i := 0; i < n; i++ {
			require.NoError(t, a.SubmitPaged(fabric.PagedWrite{Src: sr, SrcPages: idx, Dst: desc, DstPages: idx, Length: 4096},
				fabric.OnDone(func(err error) {
					calls.Add(1)
					if err != nil {
						require.ErrorIs(t, err, fabric.ErrClosed)
						fails.Add(1)
					}
				})))
		}
		// A credit wait blocked across Close ends with ErrClosed.
		ctr, err := b.ImmCounter(0x99)
		require.NoError(t, err)
		waited := make(chan error, 1)
		go func() { waited <- ctr.Wait(context.Background(), 1) }()
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		require.NoError(t, a.Close(ctx))
		require.NoError(t, b.Close(ctx))
		select {
		case err := <-waited:
			require.ErrorIs(t, err, fabric.ErrClosed)
		case <-time.After(Timeout):
			t.Fatal("ImmCounter.Wait still blocked after Close")
		}
		require.EqualValues(t, n, calls.Load(), "every transfer reported once")
		require.ErrorIs(t, a.SubmitImm(fabric.ImmWrite{Imm: 1, Dst: desc}, fabric.Completion{}), fabric.ErrClosed)
		// Calls naming a region that Close unregistered say the engine is
		// closed, not that the region is unknown.
		require.ErrorIs(t, a.SubmitSingle(fabric.SingleWrite{Src: sr, Length: 8, Dst: desc}, fabric.Completion{}), fabric.ErrClosed)
		require.ErrorIs(t, a.SubmitPaged(fabric.PagedWrite{Src: sr, SrcPages: idx, Dst: desc, DstPages: idx, Length: 8}, fabric.Completion{}), fabric.ErrClosed)
		require.ErrorIs(t, a.SubmitScatter(fabric.ScatterWrite{Src: sr, Targets: []fabric.ScatterTarget{{Length: 8, Dst: desc}}}, fabric.Completion{}), fabric.ErrClosed)
		_, err = a.RegisterHost(src, fabric.AccessLocal)
		require.ErrorIs(t, err, fabric.ErrClosed)
		_, err = a.ImmCounter(3)
		require.ErrorIs(t, err, fabric.ErrClosed)
		require.NoError(t, a.Close(ctx), "second Close")
		require.Zero(t, a.Regions())
		t.Logf("%d of %d transfers failed with ErrClosed", fails.Load(), n)
	}()
	goroutines.Check(t) // every goroutine Close was meant to end
}

// openRaw opens an engine that the test closes itself (OpenEngine closes
// at cleanup); like OpenEngine it skips where the transport cannot open
// (a build without cgo, no libfabric).
func openRaw(t *testing.T, p Params) *fabric.Engine {
	t.Helper()
	e, err := fabric.Open(context.Background(), fabric.Config{Transport: p.Transport, Node: p.Node, NICs: p.NICs, Poll: p.Poll})
	if errors.Is(err, fabric.ErrNotSupported) {
		testutil.Skip(t, FeatureOf(p.Transport), "transport %s cannot open here: %v", p.Transport, err)
	}
	require.NoError(t, err)
	return e
}

// testInfo: Info names the provider and domains; Stats count the traffic.
func testInfo(t *testing.T, p Params) {
	env := NewEnv(t, p)
	in := env.A.Info()
	require.Equal(t, p.Transport, in.Transport)
	require.Len(t, in.Groups, 1)
	require.Len(t, in.Groups[0].Domains, p.NICs)
	require.Equal(t, in.Main, env.A.MainAddress())
	require.Equal(t, p.NICs, env.A.NICs())
	require.NoError(t, Wait(t, func(c fabric.Completion) error {
		return env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, Length: 100000, Dst: env.Desc}, c)
	}))
	st := env.A.Stats()
	var posted, bytes uint64
	for _, d := range st.Domains {
		posted += d.Posted
		bytes += d.Bytes
	}
	require.EqualValues(t, p.NICs, posted)
	require.EqualValues(t, 100000, bytes)
	require.EqualValues(t, 1, st.Completed)
}
