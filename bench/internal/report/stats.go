package report

import (
	"slices"
	"time"

	"gonum.org/v1/gonum/stat"
)

// Stats is the distribution of one quantity over the timed samples of a
// case. Latencies are in microseconds.
type Stats struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"` // sample standard deviation (n-1)
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Summarize computes the statistics of v. Percentiles are nearest-rank
// (gonum's empirical quantile: the smallest sample at or above the
// fraction), so every reported value is a measured one. Summarize does
// not modify v; an empty v gives the zero Stats.
func Summarize(v []float64) Stats {
	if len(v) == 0 {
		return Stats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	mean, sd := stat.MeanStdDev(s, nil)
	if len(s) < 2 {
		sd = 0 // gonum gives NaN for a single sample
	}
	return Stats{
		N:    len(s),
		Mean: mean,
		SD:   sd,
		Min:  s[0],
		P50:  stat.Quantile(0.50, stat.Empirical, s, nil),
		P99:  stat.Quantile(0.99, stat.Empirical, s, nil),
		Max:  s[len(s)-1],
	}
}

// Micros converts durations to microseconds.
func Micros(d []time.Duration) []float64 {
	out := make([]float64, len(d))
	for i, x := range d {
		out[i] = float64(x.Nanoseconds()) / 1e3
	}
	return out
}
