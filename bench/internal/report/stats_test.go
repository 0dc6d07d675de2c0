package report

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSummarize(t *testing.T) {
	v := make([]float64, 100)
	for i := range v {
		v[99-i] = float64(i + 1) // 100 down to 1: Summarize sorts a copy
	}
	s := Summarize(v)
	require.Equal(t, Stats{N: 100, Mean: 50.5, SD: s.SD, Min: 1, P50: 50, P99: 99, Max: 100}, s)
	require.InDelta(t, 29.011, s.SD, 1e-3, "sample standard deviation of 1..100")
	require.Equal(t, 100.0, v[0], "the input is left as it was")

	one := Summarize([]float64{7})
	require.Equal(t, Stats{N: 1, Mean: 7, Min: 7, P50: 7, P99: 7, Max: 7}, one)
	require.False(t, math.IsNaN(one.SD))
	require.Equal(t, Stats{}, Summarize(nil))

	// Nearest rank: p99 of 10 samples is the largest, a measured value.
	require.Equal(t, 10.0, Summarize([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}).P99)
	require.Equal(t, 5.0, Summarize([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}).P50)
}

func TestMicros(t *testing.T) {
	require.Equal(t, []float64{1.5, 2000}, Micros([]time.Duration{1500 * time.Nanosecond, 2 * time.Millisecond}))
}
