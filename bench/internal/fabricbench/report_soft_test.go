package fabricbench

import "testing"

func TestSoftRDMANote(t *testing.T) {
	if got := softRDMA([]string{"host:rxe0#0", "host:rxe1#1"}); got != "rxe0" {
		t.Fatalf("softRDMA = %q, want rxe0", got)
	}
	if got := softRDMA([]string{"host:mlx5_0#0", "cuda:0:rdmap16s27#1"}); got != "" {
		t.Fatalf("softRDMA = %q for hardware NICs", got)
	}
	h := newHeader("loopback", Spec{}, PeerInfo{Transport: "verbs", Domains: []string{"host:rxe0#0"}})
	if h.Note == "" {
		t.Fatal("no Soft-RoCE note in the header")
	}
}
