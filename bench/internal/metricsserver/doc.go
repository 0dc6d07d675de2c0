// Package metricsserver serves the benchmark programs' Prometheus metrics
// (--metrics ADDR): each engine the program opens, through package
// fabric/fabricmetrics, plus the Go runtime and process collectors, at
// http://ADDR/metrics until the program ends.
package metricsserver
