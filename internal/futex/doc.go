// Package futex puts a thread to sleep on a 32-bit word until another
// thread, or another process where the word lies in shared memory, changes
// it and wakes the sleepers. The fabric engine's counters and the a2a
// doorbells sleep this way: a goroutine woken from a futex takes any idle
// P itself, where a channel send would ready it on the waker's P (see
// fabric's completion waits). Without futexes (not Linux) Wait naps and
// WakeAll does nothing: waiters then poll.
package futex
