// Package onedevice runs W ranks of the CUDA backend (package a2a/cudabackend) in
// one process on one Device, through their device-level launches
// (cudabackend.Backend.Steps): in lock step (every rank's phase N, then phase
// N+1: nothing waits for a launch queued after it, so it works however
// few blocks the device holds at once), concurrently (a stream per rank,
// all ranks' kernels resident together, bounded by a watchdog), and as
// replays of one recorded set of launches (a CUDA graph on a GPU), with
// the token count read from device memory. Results are compared with the
// oracle bit for bit.
//
// The tests of a2a/cudabackend (on the emulator and on a GPU) and bench-a2a's
// one-device modes (--mode lockstep|concurrent, --graph) share it.
package onedevice
