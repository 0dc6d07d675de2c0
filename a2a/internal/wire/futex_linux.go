package wire

import (
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// futexWait sleeps while *addr == v, at most d (or until woken). The word
// lies in memory shared between processes, so the futex is not private.
func futexWait(addr *atomic.Uint32, v uint32, d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	const futexWaitOp = 0
	_, _, _ = syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitOp, uintptr(v),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
}

// futexWake wakes every sleeper on addr.
func futexWake(addr *atomic.Uint32) {
	const futexWakeOp = 1
	_, _, _ = syscall.Syscall6(syscall.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakeOp, uintptr(1<<31-1), 0, 0, 0)
}
