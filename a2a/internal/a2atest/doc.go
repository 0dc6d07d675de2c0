// Package a2atest is the shared test harness of a2a backends: random
// worlds and routings, the experts' stand-in, and a runner that drives W
// Contexts through dispatch and combine and compares every rank's results
// with the oracle (package reference).
package a2atest
