// Package tests holds ferry's multi-process and cross-package tests: two
// engines in two processes (the test binary re-executing itself) talking
// over real libfabric providers on loopback.
package tests
