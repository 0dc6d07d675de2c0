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

// TestEnginePairings runs the unequal-group scenarios over verbs for
// every pairing of 1, 2 and 4 writer and target NICs. Every writer NIC
// reaches every target NIC, so the devices must be connected to each
// other through the IP stack: make test-verbs puts each rxe device on its
// own veth, all bridged, with policy routes (tests/vm/guest-init.sh).
// The engines take the first four devices the provider lists.
func TestEnginePairings(t *testing.T) {
	devs := requireDevices(t, 4)
	t.Logf("devices %s, %s, %s, %s", devs[0].Name, devs[1].Name, devs[2].Name, devs[3].Name)
	fabrictest.RunPairings(t, fabrictest.Params{Transport: "verbs"})
}
