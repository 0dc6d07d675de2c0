package osyield

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Yielder yields for one polling loop. The zero value always uses
// sched_yield; New picks Gosched where the process has a single P.
type Yielder struct {
	soleP bool // GOMAXPROCS was 1 at New
}

// New returns the Yielder for the process as it is now. With a single P
// sched_yield would keep every other goroutine off the CPU for a whole
// yield phase, so there Yield stays runtime.Gosched.
func New() Yielder { return Yielder{soleP: runtime.GOMAXPROCS(0) == 1} }

// Yield gives the calling thread's core away once.
func (y Yielder) Yield() {
	if y.soleP {
		runtime.Gosched()
		return
	}
	_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
}
