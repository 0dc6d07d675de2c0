package bench

import (
	"fmt"
	"io"
)

// WriteTable writes r for people: a header naming the run, then one line
// per phase and half with the median, p99, mean ± standard deviation,
// minimum and maximum in microseconds, and the bandwidth of the nominal
// bytes at the median of both halves (the reference benchmark's figure).
func (r *Report) WriteTable(w io.Writer) error {
	checked := "not checked against the oracle"
	if r.Checked {
		checked = "checked against the oracle first"
	}
	if _, err := fmt.Fprintf(w,
		"a2a %s backend over %s: %d ranks (nvlink %d, dp %d, %d NIC(s) per rank)\n"+
			"tokens %d, hidden %d, scales %d, experts %d, top-%d, %s dispatch, %s combine\n"+
			"%d iterations after %d warmup, %d samples from all ranks, %s\n\n",
		r.Backend, r.Provider, r.WorldSize, r.NVLink, r.Replicas, r.NICs,
		r.Tokens, r.Hidden, r.Scales, r.Experts, r.TopK, r.In, r.Out,
		r.Iters, r.Warmup, r.Samples, checked); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "%-9s %-5s %10s %10s %10s %9s %10s %10s %8s\n",
		"phase", "half", "p50 µs", "p99 µs", "mean µs", "± sd", "min µs", "max µs", "GB/s"); err != nil {
		return err
	}
	for _, ph := range []struct {
		name string
		p    *Phase
	}{{"dispatch", &r.Dispatch}, {"combine", &r.Combine}} {
		for _, h := range []struct {
			name string
			s    *Stats
		}{{"both", &ph.p.Both}, {"send", &ph.p.Send}, {"recv", &ph.p.Recv}} {
			s := h.s
			line := fmt.Sprintf("%-9s %-5s %10.1f %10.1f %10.1f %9.1f %10.1f %10.1f",
				ph.name, h.name, s.P50, s.P99, s.Mean, s.Std, s.Min, s.Max)
			if h.name == "both" {
				line += fmt.Sprintf(" %8.3f", ph.p.BandwidthGBps)
			}
			if _, err := fmt.Fprintln(w, line); err != nil {
				return err
			}
		}
	}
	_, err := fmt.Fprintf(w, "\nnominal bytes per rank: dispatch %d (T*K*(token+scales)), combine %d (T*K*combine row); GB/s = nominal / p50 of both\n",
		r.Dispatch.NominalBytes, r.Combine.NominalBytes)
	return err
}
