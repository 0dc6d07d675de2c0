package fabric

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A futex lets a goroutine sleep in its own thread and be woken by the
// worker with one system call. A channel would not do for waits the worker
// ends: a channel send readies the receiver on the sender's P (its runnext
// slot), and the worker's P is held by a locked thread that polls without
// end (PollSpin) or yields with sched_yield, so the woken goroutine waited
// for another P to steal it or for the runtime's preemption of the worker
// (10 ms): NullImm went from 0.3 to 5-100 µs per op on a loaded machine.
// A thread woken from futex takes any idle P itself.

const (
	futexWait = 0 | 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
	futexWake = 1 | 128 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
)

// futexSleep sleeps while *addr == val, at most d (at least 1 µs), or
// until futexWakeAll(addr); it may also return early for no reason.
func futexSleep(addr *atomic.Uint32, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(max(d, time.Microsecond).Nanoseconds())
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWakeAll wakes every thread asleep in futexSleep(addr, ...). It never
// blocks, so it skips the runtime's system call bookkeeping.
func futexWakeAll(addr *atomic.Uint32) {
	_, _, _ = unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake, uintptr(1<<31-1), 0, 0, 0)
}
