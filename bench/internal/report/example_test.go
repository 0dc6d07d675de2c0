package report_test

import (
	"os"

	"github.com/ferryrdma/ferry/bench/internal/report"
)

// A tool's output: the header fields, the headings, then a row per case as
// it completes, with the statistics of its timed samples.
func ExampleStream() {
	s, err := report.Open("", os.Stdout, os.Stderr) // "-" or a file name adds JSON lines
	if err != nil {
		panic(err)
	}
	s.SetColumns(report.Column{Head: "case", Width: 6, Left: true},
		report.Column{Head: "p50_us", Width: 8}, report.Column{Head: "p99_us", Width: 8},
		report.Column{Head: "verified", Left: true})
	s.Table.Field("verified", "yes = the bytes were compared and right")
	s.Table.Heading()
	for _, name := range []string{"small", "large"} {
		m := report.Measure{Iters: 4, Checked: true, Verified: true,
			Lat: report.Summarize([]float64{10, 12, 11, 40})}
		s.Table.Row(name, report.Fixed(m.Lat.P50, 1), report.Fixed(m.Lat.P99, 1), m.Verdict())
		s.Case(m)
	}
	if err := s.Close(); err != nil {
		panic(err)
	}
	// Output:
	// # verified: yes = the bytes were compared and right
	// # case     p50_us   p99_us verified
	//   small      11.0     40.0 yes
	//   large      11.0     40.0 yes
}
