package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestCNotified runs examples/notified.c (ABI 1.6): single, paged and
// scatter writes with notifications attached (ferry_submit_notified),
// each target checking every byte of the request when its notification
// arrives; a mailbox queueing FERRY_MAILBOX_DEPTH notifications; a second
// sender reported as FERRY_E_NOTIFICATIONS_LOST; bad input refused;
// ferry_engine_registration_stats counting a range-cache hit; and
// ferry_host_alloc_with's huge-page policies.
func TestCNotified(t *testing.T) {
	bin := compileExample(t, "notified")
	for _, tc := range []struct{ transport, node, nics string }{
		{"mem", "-", "2"},
		{"ipc", "-", "1"},
		{"shm", "-", "2"},
		{"tcp;ofi_rxm", "127.0.0.1", "2"},
	} {
		t.Run(fmt.Sprintf("%s/nics=%s", tc.transport, tc.nics), func(t *testing.T) {
			out, _ := run(t, bin, tc.transport, tc.node, tc.nics)
			if !strings.Contains(out, "notified "+tc.transport+": ok") {
				t.Fatalf("no ok line:\n%s", out)
			}
		})
	}
}
