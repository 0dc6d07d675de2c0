package enginetest

import (
	"fmt"
	"testing"

	_ "github.com/ferryrdma/ferry/efa"
)

// The libfabric providers that run for real on any Linux machine, pinned
// to loopback.
func TestLibfabric(t *testing.T) {
	for _, tr := range []struct{ transport, node string }{{"tcp;ofi_rxm", "127.0.0.1"}, {"shm", ""}} {
		for _, nics := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("%s/nics=%d", tr.transport, nics), func(t *testing.T) {
				Run(t, Params{Transport: tr.transport, Node: tr.node, NICs: nics})
			})
		}
	}
}
