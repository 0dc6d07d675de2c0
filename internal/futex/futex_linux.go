package futex

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Scope says who else may sleep on or wake a word.
type Scope uintptr

const (
	// Private words are woken from this process only (FUTEX_PRIVATE_FLAG:
	// the kernel skips the shared-mapping lookup).
	Private Scope = 128
	// Shared words lie in memory several processes map.
	Shared Scope = 0
)

const (
	opWait = 0 // FUTEX_WAIT
	opWake = 1 // FUTEX_WAKE
)

// Wait sleeps while *addr == val, at most d (at least 1 µs), or until
// WakeAll(addr); it may also return early for no reason, so callers
// check their condition again.
func Wait(addr *atomic.Uint32, val uint32, d time.Duration, s Scope) {
	ts := unix.NsecToTimespec(max(d, time.Microsecond).Nanoseconds())
	_, _, _ = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), opWait|uintptr(s), uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// WakeAll wakes every thread asleep in Wait on addr. It never blocks, so
// it skips the runtime's system call bookkeeping.
func WakeAll(addr *atomic.Uint32, s Scope) {
	_, _, _ = unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), opWake|uintptr(s), uintptr(1<<31-1), 0, 0, 0)
}
