package main

import "fmt"

// formatUs formats microseconds with one decimal, as the tables print
// latencies (job.NewTable, job.Summary).
func formatUs(us float64) string { return fmt.Sprintf("%.1f", us) }
