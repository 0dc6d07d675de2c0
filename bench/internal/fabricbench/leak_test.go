package fabricbench

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every engine, server goroutine and mailbox a loopback run starts ends
// with it.
func TestLoopbackLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, p := range []string{"mem", "shm", "ipc"} {
		rep, err := Loopback(testCtx(t), smallSpec(p, 2), nil)
		skipIfUnusable(t, err)
		require.NoError(t, err)
		require.False(t, rep.Failed())
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
