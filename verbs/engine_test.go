package verbs

import (
	"testing"

	"github.com/ferryrdma/ferry/fabric/fabrictest"
)

// TestEngineConformance runs the engine conformance suite (every request
// type, the immediate-count contract, counters, send/recv, bad input,
// close) over the verbs provider, with one NIC per group and with two.
func TestEngineConformance(t *testing.T) {
	for _, nics := range []int{1, 2} {
		t.Run(map[int]string{1: "1nic", 2: "2nic"}[nics], func(t *testing.T) {
			requireDevices(t, nics)
			fabrictest.Run(t, fabrictest.Params{Transport: "verbs", NICs: nics})
		})
	}
}
