package main

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric/fabrictest"
)

// TestLoopbackLibfabric runs the loopback command over the two libfabric
// providers every Linux machine has, every default workload at three
// sizes, each case verified byte for byte with its immediates counted.
// make test runs it against libfabric 1.17 and 2.1.
func TestLoopbackLibfabric(t *testing.T) {
	done := regexp.MustCompile(`# done: (\d+) cases, (\d+) verified, 0 failed`)
	for _, tr := range []struct{ provider, node string }{{"shm", ""}, {"tcp;ofi_rxm", "127.0.0.1"}} {
		t.Run(tr.provider, func(t *testing.T) {
			fabrictest.RequireTransport(t, tr.provider, tr.node)
			out, errOut, code := runHere("loopback", "--provider", tr.provider, "--sizes", "64,4K,256K",
				"--pages", "64", "--iters", "3", "--buffer-mib", "32")
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			m := done.FindStringSubmatch(out)
			require.NotNil(t, m, "no summary line in:\n%s", out)
			require.Equal(t, m[1], m[2], "every case verified:\n%s", out)
			require.Equal(t, "7", m[1], "paged and single at 3 sizes, and imm:\n%s", out)
			require.NotContains(t, errOut, "matches no operation", "every completion placed")
		})
	}
}
