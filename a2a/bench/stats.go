package bench

import (
	"math"
	"slices"
)

// summarize computes the statistics of v (microseconds). Percentiles use
// the nearest rank.
func summarize(v []float64) Stats {
	if len(v) == 0 {
		return Stats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	mean := sum / float64(len(s))
	var sq float64
	for _, x := range s {
		sq += (x - mean) * (x - mean)
	}
	p := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return Stats{Mean: mean, Std: math.Sqrt(sq / float64(len(s))), Min: s[0], P01: p(0.01), P25: p(0.25),
		P50: p(0.5), P75: p(0.75), P95: p(0.95), P99: p(0.99), Max: s[len(s)-1]}
}

// phase builds a Phase from the send and recv halves pick returns.
func phase(samples []sample, pick func(sample) (send, recv float32), nominal int64) Phase {
	send := make([]float64, len(samples))
	recv := make([]float64, len(samples))
	both := make([]float64, len(samples))
	for i, s := range samples {
		a, b := pick(s)
		send[i], recv[i], both[i] = float64(a), float64(b), float64(a)+float64(b)
	}
	ph := Phase{Both: summarize(both), Send: summarize(send), Recv: summarize(recv), NominalBytes: nominal}
	if ph.Both.P50 > 0 {
		ph.BandwidthGBps = float64(nominal) / (ph.Both.P50 * 1e3) // bytes per ns = GB/s
	}
	return ph
}
