package main

import (
	"strings"
	"testing"

	"github.com/ferryrdma/ferry/fabric/job/jobtest"
)

// The program as a user runs it: two processes over shm, tcp and ipc, and
// two goroutines over mem, with a small cache. Both -stream settings run,
// and every page is checked at the decode (a wrong byte exits 3).
func TestKVStream(t *testing.T) {
	exe := jobtest.Build(t)
	for _, p := range []struct{ provider, launch string }{{"shm", "spawn"}, {"tcp", "spawn"}, {"ipc", "spawn"}, {"mem", "inproc"}} {
		t.Run(p.provider, func(t *testing.T) {
			res := jobtest.Run(t, exe, "-provider", p.provider, "-launch", p.launch, "-layers", "4", "-tokens", "256",
				"-kv-heads", "2", "-head-dim", "64", "-layer-time", "1ms", "-requests", "2")
			res.RequireOK(t, 2)
			modes := res.Results(t)["modes"].([]any)
			if len(modes) != 2 {
				t.Fatalf("want both -stream modes, got %v", modes)
			}
			for _, m := range modes {
				m := m.(map[string]any)
				// 4 layers x 16 pages of 16 tokens x 2 heads x 64 x 2 B x K,V.
				if m["pages"] != float64(64) || m["kv_bytes"] != float64(64*8192) || m["requests"] != float64(2) {
					t.Errorf("mode %v: %v", m["stream"], m)
				}
				if m["ttft_p50_ms"].(float64) <= 0 {
					t.Errorf("mode %v: no time to first token", m["stream"])
				}
			}
			if !strings.Contains(res.Stdout, "every page verified") || !strings.Contains(res.Stdout, "engine: provider=") {
				t.Errorf("stdout:\n%s", res.Stdout)
			}
		})
	}
}

func TestKVStreamBadFlags(t *testing.T) {
	exe := jobtest.Build(t)
	for _, args := range [][]string{
		{"-layers", "4"},                          // no -provider
		{"-provider", "nope"},                     // unknown provider
		{"-provider", "shm", "-launch", "inproc"}, // two shm engines in one process
		{"-provider", "mem", "-tokens", "0"},
	} {
		if res := jobtest.Run(t, exe, args...); res.Code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", args, res.Code, res.Stderr)
		}
	}
}

// The decode's check finds a single wrong byte, a page written for another
// layer or request, and a page at the wrong place.
func TestCheckPage(t *testing.T) {
	page := make([]byte, 4096)
	fillPage(page, 7, 3, 2, 5)
	if bad := checkPage(page, 7, 3, 2, 5); bad != -1 {
		t.Fatalf("a correct page fails at byte %d", bad)
	}
	for _, other := range [][3]int{{4, 2, 5}, {3, 1, 5}, {3, 2, 6}} {
		if checkPage(page, 7, uint32(other[0]), other[1], other[2]) != 0 {
			t.Errorf("page of (3,2,5) passes as %v", other)
		}
	}
	page[1234] ^= 0x10
	if bad := checkPage(page, 7, 3, 2, 5); bad != 1232 {
		t.Errorf("flipped byte 1234: check says %d, want the word at 1232", bad)
	}
}
