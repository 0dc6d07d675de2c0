package efa_test

import (
	"fmt"
	"testing"

	_ "github.com/ferryrdma/ferry/efa"
	"github.com/ferryrdma/ferry/fabric/fabrictest"
)

// TestConformance runs the engine conformance suite over the libfabric
// providers that run for real on any Linux machine, pinned to loopback,
// with 1, 2 and 4 NICs per engine.
func TestConformance(t *testing.T) {
	for _, tr := range []struct{ transport, node string }{{"tcp;ofi_rxm", "127.0.0.1"}, {"shm", ""}} {
		for _, nics := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("%s/nics=%d", tr.transport, nics), func(t *testing.T) {
				fabrictest.Run(t, fabrictest.Params{Transport: tr.transport, Node: tr.node, NICs: nics})
			})
		}
	}
}

// TestPairings runs unequal writer and target groups over the same
// providers: 1 to 4 and 4 to 1 NICs, every pairing of 1, 2 and 4 with
// FERRY_TEST_PAIRINGS=all (make test-pairings).
func TestPairings(t *testing.T) {
	for _, tr := range []struct{ transport, node string }{{"tcp;ofi_rxm", "127.0.0.1"}, {"shm", ""}} {
		t.Run(tr.transport, func(t *testing.T) {
			fabrictest.RunPairingsSubset(t, fabrictest.Params{Transport: tr.transport, Node: tr.node})
		})
	}
}
