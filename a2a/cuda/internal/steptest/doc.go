// Package steptest drives W ranks of the CUDA backend in one process
// through its device-level launches (cuda.Backend.Steps), on any Device:
// in lock step (every rank's phase N, then phase N+1), concurrently (a
// goroutine and a stream per rank), and as replays of one fixed set of
// launches (what a CUDA graph replays), with the token count read from
// device memory. Every iteration is checked against the oracle bit for
// bit. The emulator's tests and the GPU tests share it.
package steptest
