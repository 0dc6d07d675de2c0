package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestCConnect runs examples/connect.c (ABI 1.4): ferry_connect before the
// first write, again without harm, a closed engine refused in time, bad
// arguments refused.
func TestCConnect(t *testing.T) {
	bin := compileExample(t, "connect")
	for _, tc := range []struct{ transport, node, nics string }{
		{"mem", "-", "2"},
		{"ipc", "-", "1"},
		{"shm", "-", "1"},
		{"tcp;ofi_rxm", "127.0.0.1", "2"},
	} {
		t.Run(fmt.Sprintf("%s/nics=%s", tc.transport, tc.nics), func(t *testing.T) {
			out, _ := run(t, bin, tc.transport, tc.node, tc.nics)
			if !strings.Contains(out, "connect "+tc.transport+": ok") {
				t.Fatalf("no ok line:\n%s", out)
			}
		})
	}
}
