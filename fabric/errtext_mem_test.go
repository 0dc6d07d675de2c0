package fabric_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/testutil"
	"github.com/ferryrdma/ferry/memfabric"
)

// TestErrorTextHasNoBadVerbs formats every error the mem provider's faults
// make the engine produce (failed and refused writes, a reset and a dead
// peer, a stray completion, a failed domain, a deadline, a worker stuck in
// a provider call and abandoned, ops left with the provider at close), and
// the engine's log lines meanwhile: none holds the "%!" fmt writes for a
// bad verb or a nil wrapped error ("%!w(<nil>)").
func TestErrorTextHasNoBadVerbs(t *testing.T) {
	sink := &testutil.Buffer{}
	logger := slog.New(slog.NewTextHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var texts []string
	var engines []*fabric.Engine
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			texts = append(texts, what+": "+err.Error())
		}
	}
	faults := []struct {
		name string
		f    memfabric.Faults
	}{
		{"failed write", memfabric.Faults{FailWrites: 1, Errno: 5}},
		{"refused post", memfabric.Faults{RefusePosts: 1}},
		{"reset", memfabric.Faults{ResetWrites: 1}},
		{"stray error", memfabric.Faults{StrayErrors: 1, FailWrites: 1}},
		{"domain failed", memfabric.Faults{PollError: &fabric.ProviderError{Provider: "mem", Op: "poll", Errno: 5, Msg: "injected"}}},
	}
	for _, fc := range faults {
		a, _, src, desc := errPair(t, &engines, fabric.Config{Logger: logger, LogLevel: slog.LevelDebug})
		require.NoError(t, memfabric.Inject(a.Info().Groups[0].Domains[0].Address, fc.f))
		tr := fabric.NewTransfer()
		if err := a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 4096, Dst: desc}, fabric.Notify(tr)); err != nil {
			check(fc.name+" submit", err)
			continue
		}
		check(fc.name, tr.Wait(waitCtx(t)))
	}

	// A dead target, a deadline, and the close that gives up on the ops
	// the provider still holds.
	a, b, src, desc := errPair(t, &engines, fabric.Config{Logger: logger, LogLevel: slog.LevelDebug})
	require.NoError(t, memfabric.Inject(b.Info().Groups[0].Domains[0].Address, memfabric.Faults{Dead: true}))
	tr := fabric.NewTransfer()
	require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 4096, Dst: desc},
		fabric.Notify(tr).WithDeadline(time.Now().Add(5*time.Second))))
	check("dead peer", tr.Wait(waitCtx(t)))
	check("peer status", a.PeerStatus(desc.NICs[0].Addr))
	a2, _, src2, desc2 := errPair(t, &engines, fabric.Config{Logger: logger, LogLevel: slog.LevelDebug})
	require.NoError(t, memfabric.Inject(a2.Info().Groups[0].Domains[0].Address, memfabric.Faults{HoldWrites: true}))
	tr = fabric.NewTransfer()
	require.NoError(t, a2.SubmitSingle(fabric.SingleWrite{Src: src2, Length: 4096, Dst: desc2},
		fabric.Notify(tr).WithDeadline(time.Now().Add(20*time.Millisecond))))
	check("deadline", tr.Wait(waitCtx(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	check("close with held ops", a2.Close(ctx))

	// A worker stuck inside a provider call, abandoned by the watchdog.
	block := make(chan struct{})
	a3, _, src3, desc3 := errPair(t, &engines, fabric.Config{Logger: logger, LogLevel: slog.LevelDebug, StuckTimeout: 100 * time.Millisecond})
	require.NoError(t, memfabric.Inject(a3.Info().Groups[0].Domains[0].Address, memfabric.Faults{BlockPosts: block}))
	tr = fabric.NewTransfer()
	require.NoError(t, a3.SubmitSingle(fabric.SingleWrite{Src: src3, Length: 4096, Dst: desc3}, fabric.Notify(tr)))
	check("stuck worker", tr.Wait(waitCtx(t)))
	check("submit to an abandoned worker", a3.SubmitSingle(fabric.SingleWrite{Src: src3, Length: 8, Dst: desc3}, fabric.Notify(fabric.NewTransfer())))
	ctx3, cancel3 := context.WithTimeout(context.Background(), time.Second)
	defer cancel3()
	check("close with an abandoned worker", a3.Close(ctx3))
	close(block)

	// Every engine's Close, and what it says.
	for _, e := range engines {
		cctx, ccancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		check("close", e.Close(cctx))
		ccancel()
	}

	require.GreaterOrEqual(t, len(texts), 10, "errors formatted: %q", texts)
	for _, s := range texts {
		require.NotContains(t, s, "%!", "a badly formatted error")
	}
	logs := sink.String()
	for _, l := range strings.Split(logs, "\n") {
		require.NotContains(t, l, "%!", "a badly formatted log line")
	}
	t.Logf("%d errors formatted, %d log lines", len(texts), strings.Count(logs, "\n"))
}

// errPair is memPair for engines that may end badly: they are appended to
// *engines, which the test closes and whose errors it looks at.
func errPair(t *testing.T, engines *[]*fabric.Engine, cfg fabric.Config) (a, b *fabric.Engine, src *fabric.MemoryRegion, desc fabric.Descriptor) {
	t.Helper()
	cfg.Transport = "mem"
	open := func() *fabric.Engine {
		e, err := fabric.Open(context.Background(), cfg)
		require.NoError(t, err)
		*engines = append(*engines, e)
		return e
	}
	sbuf, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	dbuf, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	a, b = open(), open()
	// Freed only once both engines are closed (the test closes them).
	t.Cleanup(func() { _ = sbuf.Free(); _ = dbuf.Free() })
	src, err = a.RegisterHost(sbuf, fabric.AccessLocal)
	require.NoError(t, err)
	dr, err := b.RegisterHost(dbuf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	desc, err = dr.Descriptor()
	require.NoError(t, err)
	return a, b, src, desc
}
