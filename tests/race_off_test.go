//go:build !race

package tests

// raceDetector: this binary runs under the race detector.
const raceDetector = false
