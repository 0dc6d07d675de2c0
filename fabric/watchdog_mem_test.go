package fabric_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/memfabric"
)

// TestWatchdogJudgesProgress: a provider call that lasts far longer than
// the stuck timeout but keeps moving bytes (a slow copy, reported through
// fabric.ProgressReporter) is not taken for a stuck call: the write
// completes and the worker is not abandoned. A call that moves nothing
// (BlockPosts) still is, as before.
func TestWatchdogJudgesProgress(t *testing.T) {
	cfg := fabric.Config{StuckTimeout: 400 * time.Millisecond}
	a, _, src, desc := memPair(t, cfg)
	// 1 MiB in 64 slices of 16 KiB, 25 ms apart: one call of about 1.6 s,
	// four stuck timeouts, that moves bytes every 25 ms.
	require.NoError(t, memfabric.Inject(a.Info().Groups[0].Domains[0].Address, memfabric.Faults{SlowCopy: 25 * time.Millisecond}))
	tr := fabric.NewTransfer()
	start := time.Now()
	require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 1 << 20, Dst: desc}, fabric.Notify(tr)))
	require.NoError(t, tr.Wait(waitCtx(t)), "a slow copy that moves is not a stuck call")
	require.Greater(t, time.Since(start), cfg.StuckTimeout, "the call outlasted the stuck timeout")
	require.NoError(t, memfabric.Inject(a.Info().Groups[0].Domains[0].Address, memfabric.Faults{}))
	tr = fabric.NewTransfer()
	require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 4096, Dst: desc}, fabric.Notify(tr)), "the worker was not abandoned")
	require.NoError(t, tr.Wait(waitCtx(t)))
}
