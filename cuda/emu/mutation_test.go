package emu_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ferryrdma/ferry/cuda/emu"
)

// TestMutations proves the emulator's checks catch real kernel bugs:
// copy_scan is rebuilt with one bug at a time and run both ways, the
// functional check (8 blocks of 512 threads, against Go) and the
// ThreadSanitizer scenarios. Each bug must be caught by the check that
// can see it, and the unmutated kernel passes both (TestCopyScan,
// TestThreadSanitizer).
func TestMutations(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	type result struct{ functional, tsan string }
	cases := []struct {
		define string
		// mustFunctional/mustTSan: which check has to catch it. A relaxed
		// publish still works on x86 (only the race checker sees it); an
		// off-by-one copy is plain wrong data, race free.
		mustFunctional, mustTSan bool
	}{
		{"FD_MUTATE_DROP_SYNCTHREADS", false, true},
		{"FD_MUTATE_RELAXED_PUBLISH", false, true},
		{"FD_MUTATE_COPY_OFF_BY_ONE", true, false},
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-28s %-40s %s\n", "MUTATION", "FUNCTIONAL CHECK", "THREADSANITIZER")
	for _, c := range cases {
		m := emuModule(t, c.define)
		var res result
		if _, err := copyScan(t, m, 2, 8, 512, 4096); err != nil {
			res.functional = "caught: " + firstLine(err.Error(), 60)
		} else {
			res.functional = "passed"
		}
		m.Close()
		races, failed, out := emu.TSanCopyScan(t, "EMU_BLOCK=128", c.define)
		switch {
		case races > 0:
			res.tsan = fmt.Sprintf("caught: %d data race reports", races)
		case failed:
			res.tsan = "caught: check failed"
		default:
			res.tsan = "clean"
		}
		fmt.Fprintf(&table, "%-28s %-40s %s\n", c.define, res.functional, res.tsan)
		if c.mustFunctional && !strings.HasPrefix(res.functional, "caught") {
			t.Errorf("%s not caught by the functional check", c.define)
		}
		if c.mustTSan && races == 0 {
			t.Errorf("%s not caught by ThreadSanitizer:\n%s", c.define, firstLine(out, 2000))
		}
	}
	t.Logf("mutation results:\n%s", table.String())
}

func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 && n < 200 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
