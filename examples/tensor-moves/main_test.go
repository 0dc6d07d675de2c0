package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/ferryrdma/ferry/fabric/job/jobtest"
)

// The frontend as a user runs it: dispatcher, two workers and the client
// rank as four processes over shm and over tcp, both modes with the same
// streams; three workers as goroutines over mem. Every op's result is
// checksummed against the client's own copy (a mismatch exits 3).
func TestTensorMoves(t *testing.T) {
	exe := jobtest.Build(t)
	for _, tc := range []struct {
		provider, launch string
		workers          int
	}{{"shm", "spawn", 2}, {"tcp", "spawn", 2}, {"mem", "inproc", 3}} {
		t.Run(tc.provider, func(t *testing.T) {
			res := jobtest.Run(t, exe, "-provider", tc.provider, "-launch", tc.launch, "-workers", strconv.Itoa(tc.workers),
				"-clients", "2", "-ops", "25", "-sizes", "4K,64K", "-arena", "8M")
			res.RequireOK(t, 2+tc.workers)
			out := res.Results(t)
			modes := out["modes"].([]any)
			if len(modes) != 2 {
				t.Fatalf("modes: %v", modes)
			}
			relay, direct := modes[0].(map[string]any), modes[1].(map[string]any)
			// The same seeded streams ran in both modes.
			if relay["ops"] != direct["ops"] || relay["ops"].(float64) < 2*20 {
				t.Errorf("ops: relay %v, direct %v", relay["ops"], direct["ops"])
			}
			// Relay carries tensor bytes through the dispatcher, direct none.
			if relay["dispatcher"].(map[string]any)["data_bytes"].(float64) == 0 ||
				direct["dispatcher"].(map[string]any)["data_bytes"] != float64(0) {
				t.Errorf("bytes through the dispatcher: relay %v, direct %v", relay["dispatcher"], direct["dispatcher"])
			}
			kinds := map[string]bool{}
			for _, g := range out["by_kind_and_size"].([]any) {
				kinds[g.(map[string]any)["kind"].(string)] = true
			}
			for _, k := range []string{"create", "move", "add", "matmul-allgather", "sum-reduce"} {
				if !kinds[k] {
					t.Errorf("no %s op ran: %v", k, kinds)
				}
			}
			if !strings.Contains(res.Stdout, "direct/relay speedup") {
				t.Errorf("stdout:\n%s", res.Stdout)
			}
		})
	}
}

// A shard's checksum adds to the others' into the whole tensor's, which is
// how the dispatcher checks a sharded create; a changed element or a
// swapped pair changes it.
func TestChecksum(t *testing.T) {
	x := make([]uint32, 96)
	fill(x, 5, 0)
	whole := checksum(x, 0)
	if checksum(x[:40], 0)+checksum(x[40:], 40) != whole {
		t.Error("shard checksums do not add up to the whole's")
	}
	y := append([]uint32(nil), x...)
	y[3], y[4] = y[4], y[3]
	if checksum(y, 0) == whole {
		t.Error("a swapped pair keeps the checksum")
	}
	y[3], y[4] = y[4], y[3]
	y[50]++
	if checksum(y, 0) == whole {
		t.Error("a changed element keeps the checksum")
	}
}

// The arena never hands out overlapping spans, reuses freed space, and
// allocAll finds an offset free on every worker.
func TestArena(t *testing.T) {
	a := arena{size: 1024}
	x, _ := a.alloc(100) // 128 with alignment
	y, _ := a.alloc(64)
	if x != 0 || y != 128 {
		t.Fatalf("alloc: %d, %d", x, y)
	}
	if _, ok := a.alloc(1024); ok {
		t.Error("allocated past the end")
	}
	a.free(x)
	if z, _ := a.alloc(64); z != 0 {
		t.Errorf("freed space not reused: %d", z)
	}
	as := []arena{{size: 1024}, {size: 1024}}
	as[0].alloc(200) // [0, 256)
	as[1].alloc(64)  // [0, 64)
	as[1].alloc(512) // [64, 576)
	off, ok := allocAll(as, 128)
	if !ok || off != 576 {
		t.Errorf("allocAll: %d %v, want 576", off, ok)
	}
	if _, ok := allocAll(as, 512); ok {
		t.Error("allocAll past the end")
	}
}
