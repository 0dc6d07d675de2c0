package verbs

import (
	"fmt"
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

// TestEnginePairings runs unequal groups over verbs: a 1-NIC writer to a
// 2-NIC target and back (the VM has two devices).
func TestEnginePairings(t *testing.T) {
	for _, nm := range [][2]int{{1, 2}, {2, 1}} {
		t.Run(fmt.Sprintf("%dto%d", nm[0], nm[1]), func(t *testing.T) {
			requireDevices(t, 2)
			t.Skip("unequal NIC groups need every writer NIC to reach every target NIC; the test " +
				"VM's rxe0 and rxe1 sit on separate dummy links that carry no traffic between " +
				"them (the RC handshake times out), so unequal groups over verbs are unverified")
			fabrictest.RunPairing(t, fabrictest.Params{Transport: "verbs", NICs: nm[0], TargetNICs: nm[1]})
		})
	}
}
