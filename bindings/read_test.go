package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestCRead runs examples/read.c (ABI 1.5): single, paged and scatter
// reads checked byte for byte, a write-only region refused with
// FERRY_E_NOT_READABLE where the transport checks, bad input refused,
// and ferry_expected_imms against the immediates a write delivers.
func TestCRead(t *testing.T) {
	bin := compileExample(t, "read")
	for _, tc := range []struct{ transport, node, nics string }{
		{"mem", "-", "2"},
		{"ipc", "-", "1"},
		{"shm", "-", "1"},
		{"tcp;ofi_rxm", "127.0.0.1", "2"},
	} {
		t.Run(fmt.Sprintf("%s/nics=%s", tc.transport, tc.nics), func(t *testing.T) {
			out, _ := run(t, bin, tc.transport, tc.node, tc.nics)
			if !strings.Contains(out, "read "+tc.transport+": ok") {
				t.Fatalf("no ok line:\n%s", out)
			}
		})
	}
}
