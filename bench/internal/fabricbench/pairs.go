package fabricbench

import (
	"context"
	"fmt"
	"time"
)

// A read and a single write of one size in one run are a pair: the client
// runs them in alternating rounds, a few iterations of one, then of the
// other (which goes first alternates too), and reports each as one row
// built from all its rounds. Run one after the other, the two rows of a
// large size rest on a handful of iterations each, taken a second apart:
// on a shared machine whose load changes from one second to the next, the
// ratio of the two rows then says more about the load than about reads.
// In rounds both see the same machine.
//
// A pair runs at least pairIters iterations of each case unless the spec
// fixes Iters, in at most pairRounds rounds. The first round of each case
// carries its warmup; the last one its check (offer and check for the
// read, immediates and the target's check for the write), so each row is
// verified as when run alone.
const (
	pairIters  = 16
	pairRounds = 16
)

// readPairs returns, for each case, the index of its partner, or -1: a
// read and a single write of the same size pair up.
func readPairs(cases []Case) []int {
	partner := make([]int, len(cases))
	for i := range partner {
		partner[i] = -1
	}
	for i, r := range cases {
		if r.Workload != Read {
			continue
		}
		for j, w := range cases {
			if w.Workload == Single && w.Bytes == r.Bytes && partner[j] < 0 {
				partner[i], partner[j] = j, i
				break
			}
		}
	}
	return partner
}

// roundIters splits iters iterations into at most pairRounds rounds, the
// earlier rounds one longer when they do not divide evenly.
func roundIters(iters int) []int {
	n := min(iters, pairRounds)
	out := make([]int, n)
	for r := range out {
		out[r] = iters / n
		if r < iters%n {
			out[r]++
		}
	}
	return out
}

// runPair runs cases i and j (a pair, i < j) in rounds and returns their
// rows in that order. A round that fails ends the pair: its case's row
// carries the error, the other's says it was cut short unless it had
// already run every round.
func (c *Client) runPair(ctx context.Context, spec Spec, cases []Case, i, j int, span uint64) ([2]Result, error) {
	idx := [2]int{i, j}
	iters := max(cases[i].Iters, cases[j].Iters)
	if spec.Iters == 0 {
		iters = max(iters, pairIters)
	}
	var out [2]Result
	var lat [2][]time.Duration
	for k := range out {
		out[k] = newResult(cases[idx[k]])
	}
	rounds := roundIters(iters)
	failed, failedErr := -1, error(nil)
run:
	for r, n := range rounds {
		for step := range 2 {
			k := step
			if r%2 == 1 {
				k = 1 - step
			}
			cs := cases[idx[k]]
			one := cs
			one.Iters = n
			if r > 0 {
				one.Warmup = 0
			}
			one.Verify = cs.Verify && r == len(rounds)-1
			res, l, err := c.runCase(ctx, spec, one, span, caseImm(idx[k]))
			if err == nil && len(l) != n {
				err = fmt.Errorf("round %d: the server sent %d iteration times for %d iterations: %w", r, len(l), n, ErrRemote)
			}
			lat[k] = append(lat[k], l...)
			if one.Verify {
				out[k].Checked, out[k].Verified = res.Checked, res.Verified
			}
			if err != nil {
				failed, failedErr = k, err
				break run
			}
		}
	}
	for k := range out {
		cs := cases[idx[k]]
		checked, verified := out[k].Checked, out[k].Verified
		if len(lat[k]) > 0 {
			out[k] = Summarize(cs, lat[k], c.Server.NICs, c.Server.LinkSpeed)
		}
		out[k].Checked, out[k].Verified = checked, verified
		switch {
		case k == failed:
			out[k].Error = failedErr.Error()
		case failed >= 0 && len(lat[k]) < iters:
			out[k].Error = fmt.Sprintf("cut short: it ran in rounds with %s, which failed", caseName(cases[idx[failed]]))
		}
	}
	if failed >= 0 {
		return out, fmt.Errorf("%s (in rounds with %s): %w", caseName(cases[idx[failed]]),
			caseName(cases[idx[1-failed]]), failedErr)
	}
	return out, nil
}

// nanos and durations carry timed iterations over the control channel.
func nanos(d []time.Duration) []int64 {
	out := make([]int64, len(d))
	for i, x := range d {
		out[i] = x.Nanoseconds()
	}
	return out
}

func durations(ns []int64) []time.Duration {
	out := make([]time.Duration, len(ns))
	for i, x := range ns {
		out[i] = time.Duration(x)
	}
	return out
}
