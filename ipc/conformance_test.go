package ipc_test

import (
	"fmt"
	"testing"

	"github.com/ferryrdma/ferry/fabric/fabrictest"
	_ "github.com/ferryrdma/ferry/ipc"
)

// The engine conformance suite over ipc, with 1, 2 and 4 endpoints per
// engine: the same body the mem and libfabric providers run.
func TestConformance(t *testing.T) {
	for _, nics := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("nics=%d", nics), func(t *testing.T) {
			fabrictest.Run(t, fabrictest.Params{Transport: "ipc", NICs: nics})
		})
	}
}

// Unequal writer and target groups over ipc: 1 to 4 and 4 to 1
// endpoints, every pairing of 1, 2 and 4 with FERRY_TEST_PAIRINGS=all
// (make test-pairings).
func TestPairings(t *testing.T) {
	fabrictest.RunPairingsSubset(t, fabrictest.Params{Transport: "ipc"})
}
