package fabric

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// besidePriority is the nice value of the threads that register beside
// the workers: below the workers and the program's own threads (nice 0),
// so under contention the kernel gives the data path the CPU first, yet
// above idle, so a registration still finishes while transfers run.
const besidePriority = 10

// lowerThreadPriority moves the calling goroutine onto a thread of its
// own at besidePriority. The goroutine never unlocks the thread: when it
// returns the runtime ends the thread, so the lowered priority never
// reaches other goroutines. A refusal (a seccomp filter) leaves the
// priority as it was: registration still works, only without the
// courtesy.
func lowerThreadPriority() {
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), besidePriority)
}
