package fabric

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// waker is a worker's sleep: ppoll on an eventfd, with a timeout precise
// to microseconds (the thread's timer slack is lowered too), woken early by
// signal from any goroutine.
type waker struct {
	fd  int
	fds []unix.PollFd // ours first, then the sleeping domains'; reused: sleeping must not allocate
	ts  unix.Timespec
	buf [8]byte // the eventfd's counter, read into here: a local escapes under -race
}

// open creates the eventfd. It lives as long as the engine, not the
// worker: goroutines may still signal a worker that just exited, and a
// closed descriptor number could be reused by anything.
func (k *waker) open() error {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("worker wake eventfd: %w", err)
	}
	k.fd = fd
	k.fds = []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	return nil
}

// watch adds a domain's wake descriptor (see Sleeper) to what sleep waits
// on when asked to.
func (k *waker) watch(fd int) {
	k.fds = append(k.fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
}

// tune lowers the calling thread's timer slack: the default 50 µs would
// stretch every short sleep. The worker runs on its own locked thread, so
// this only affects it.
func (k *waker) tune() { _ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0) }

// close releases the eventfd once nobody can signal it any more.
func (k *waker) close() {
	if k.fd > 0 {
		_ = unix.Close(k.fd)
		k.fd = -1
	}
}

// sleep waits up to d for a signal, and with domains for their wake
// descriptors too (which their Awake clears).
func (k *waker) sleep(d time.Duration, domains bool) {
	fds := k.fds[:1]
	if domains {
		fds = k.fds
	}
	k.ts = unix.NsecToTimespec(d.Nanoseconds())
	if n, _ := unix.Ppoll(fds, &k.ts, nil); n > 0 && k.fds[0].Revents != 0 {
		_, _ = unix.Read(k.fd, k.buf[:])
	}
}

var one = [8]byte{1}

func (k *waker) signal() { _, _ = unix.Write(k.fd, one[:]) }
