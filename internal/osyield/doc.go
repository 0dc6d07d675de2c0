// Package osyield gives the core of a thread-locked polling loop away
// once, through the kernel's sched_yield rather than runtime.Gosched: a
// locked goroutine that calls Gosched hands its P to another thread and
// is woken back later (two futex calls and two thread switches per
// yield), while sched_yield lets the OS run someone else and keeps the P.
// The fabric engine's workers and the a2a/cudabackend backend's worker poll
// this way.
package osyield
