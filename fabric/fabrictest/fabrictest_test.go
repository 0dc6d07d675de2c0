package fabrictest_test

import (
	"fmt"
	"testing"

	"github.com/ferryrdma/ferry/fabric/fabrictest"
)

// The suite over the in-process transport with 1, 2 and 4 NICs, through
// the public entry point, as a user's module runs it.
func TestConformanceMem(t *testing.T) {
	for _, nics := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("nics=%d", nics), func(t *testing.T) {
			fabrictest.Run(t, fabrictest.Params{Transport: fabrictest.Mem, NICs: nics})
		})
	}
}

// Every pairing of 1, 2 and 4 writer NICs with 1, 2 and 4 target NICs
// over the in-process transport.
func TestPairingsMem(t *testing.T) {
	fabrictest.RunPairings(t, fabrictest.Params{Transport: fabrictest.Mem})
}
