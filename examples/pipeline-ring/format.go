package main

// The tables and figures this program prints.

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ferryrdma/ferry/fabric/job"
)

// table prints aligned, right-justified columns: a header row, then one
// row per row call.
type table struct{ tw *tabwriter.Writer }

// newTable starts a table on w with the given column headers.
func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)}
	t.row(headers...)
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")+"\t") }

// flush prints the table.
func (t *table) flush() { _ = t.tw.Flush() }

// formatSize formats a byte count with a binary suffix.
func formatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// parseSize parses a byte count with an optional K, M or G suffix
// (binary; a trailing B or iB is allowed).
func parseSize(s string) (int64, error) {
	mult := int64(1)
	t := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(s, "iB"), "B"))
	switch {
	case strings.HasSuffix(t, "K"):
		mult, t = 1<<10, t[:len(t)-1]
	case strings.HasSuffix(t, "M"):
		mult, t = 1<<20, t[:len(t)-1]
	case strings.HasSuffix(t, "G"):
		mult, t = 1<<30, t[:len(t)-1]
	}
	var n int64
	if _, err := fmt.Sscanf(t, "%d", &n); err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: size %q", job.ErrUsage, s)
	}
	return n * mult, nil
}

// summary summarises a set of durations, in microseconds.
type summary struct {
	N    int     `json:"n"`
	Min  float64 `json:"min_us"`
	P50  float64 `json:"p50_us"`
	P99  float64 `json:"p99_us"`
	Max  float64 `json:"max_us"`
	Mean float64 `json:"mean_us"`
}

// summarize sorts d (in place) and returns its summary.
func summarize(d []time.Duration) summary {
	if len(d) == 0 {
		return summary{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	us := func(x time.Duration) float64 { return float64(x) / 1e3 }
	return summary{N: len(d), Min: us(d[0]), P50: us(d[len(d)/2]), P99: us(d[(len(d)*99)/100]),
		Max: us(d[len(d)-1]), Mean: us(sum / time.Duration(len(d)))}
}

// formatUs formats microseconds with one decimal.
func formatUs(us float64) string { return fmt.Sprintf("%.1f", us) }
