// Package report is the output layer the benchmark programs share
// (fabric-debug and bench-a2a): the statistics of a set of timed samples,
// a table that prints its header once and then one row per case as the
// case completes, and a JSON stream of one object per line written as the
// run goes, so a run cut short by a timeout or a crash keeps every row it
// finished.
//
// # Records
//
// Every JSON line is an object with a "type": one "begin" record (the
// tool, the time, the command line, what "verified" means and the tool's
// own setup), then one "case" record per measured case, then one "end"
// record with the counts. Case records of every tool carry the fields of
// [Measure] (iterations, latency statistics in microseconds, whether the
// case was checked and verified, its error) beside their own.
//
// # Units
//
// Latencies are microseconds everywhere: in [Stats], in the JSON and in
// every latency column of a table. Each table column has one unit, named
// in its heading.
package report
