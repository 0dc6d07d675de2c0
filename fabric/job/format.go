package job

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// What the example programs print and parse, the same way in each: their
// tables, byte counts with binary suffixes, and latency summaries.

// Table prints aligned, right-justified columns: a header row, then one
// row per Row call, all written at Flush. It is not safe for concurrent
// use.
type Table struct{ tw *tabwriter.Writer }

// NewTable starts a table on w with the given column headers.
func NewTable(w io.Writer, headers ...string) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)}
	t.Row(headers...)
	return t
}

// Row adds a row of cells.
func (t *Table) Row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")+"\t") }

// Flush prints the table.
func (t *Table) Flush() error { return t.tw.Flush() }

// FormatSize formats a byte count with a binary suffix: whole units
// without decimals ("64 KiB"), others rounded ("1.5 MiB", "1.25 GiB").
func FormatSize(n int64) string {
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

// ParseSize parses a positive byte count with an optional K, M or G
// suffix (binary; a trailing B or iB is allowed: "64", "4K", "16KiB").
// A malformed or non-positive size wraps ErrUsage: it comes from a flag.
func ParseSize(s string) (int64, error) {
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
		return 0, fmt.Errorf("%w: size %q", ErrUsage, s)
	}
	return n * mult, nil
}

// ParseSizes parses a comma-separated list of sizes (ParseSize each,
// spaces around them allowed).
func ParseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		n, err := ParseSize(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// Summary summarises a set of durations, in microseconds; its JSON form
// is what the example programs' reports hold.
type Summary struct {
	N    int     `json:"n"`
	Min  float64 `json:"min_us"`
	P50  float64 `json:"p50_us"`
	P99  float64 `json:"p99_us"`
	Max  float64 `json:"max_us"`
	Mean float64 `json:"mean_us"`
}

// Summarize sorts d (in place) and returns its summary; the zero Summary
// for none.
func Summarize(d []time.Duration) Summary {
	if len(d) == 0 {
		return Summary{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	us := func(x time.Duration) float64 { return float64(x) / 1e3 }
	return Summary{N: len(d), Min: us(d[0]), P50: us(d[len(d)/2]), P99: us(d[(len(d)*99)/100]),
		Max: us(d[len(d)-1]), Mean: us(sum / time.Duration(len(d)))}
}
