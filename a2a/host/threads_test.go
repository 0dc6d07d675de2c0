package host

import "testing"

// TestReduceThreads: the reduction splits only over the cores this rank's
// share of the machine has.
func TestReduceThreads(t *testing.T) {
	for _, c := range []struct{ asked, cpus, domain, want int }{
		{0, 2, 2, 1},  // nothing asked
		{1, 64, 1, 1}, // one asked
		{2, 2, 2, 1},  // two ranks on two cores: none spare
		{4, 2, 1, 2},  // one rank on two cores
		{4, 16, 2, 4}, // enough cores
		{8, 16, 4, 4}, // four ranks on sixteen cores
		{3, 1, 8, 1},  // more ranks than cores
		{-1, 8, 1, 1},
	} {
		if got := reduceThreads(c.asked, c.cpus, c.domain); got != c.want {
			t.Errorf("reduceThreads(%d asked, %d cpus, %d ranks) = %d, want %d", c.asked, c.cpus, c.domain, got, c.want)
		}
	}
}
