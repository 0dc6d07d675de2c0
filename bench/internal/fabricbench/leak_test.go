package fabricbench

import (
	"testing"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/stretchr/testify/require"
)

// Every engine, server goroutine and mailbox a loopback run starts ends
// with it.
func TestLoopbackLeavesNoGoroutines(t *testing.T) {
	goroutines := testutil.SnapshotGoroutines()
	for _, p := range []string{"mem", "shm", "ipc"} {
		rep, err := Loopback(testCtx(t), smallSpec(p, 2), nil)
		skipIfUnusable(t, err)
		require.NoError(t, err)
		require.False(t, rep.Failed())
	}
	goroutines.Check(t)
}
