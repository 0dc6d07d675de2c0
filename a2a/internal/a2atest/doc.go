// Package a2atest is the shared test harness of a2a backends: it drives W
// Contexts through dispatch and combine at once, with inputs from package
// workload, and compares every rank's results with the oracle.
package a2atest
