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
	fds [1]unix.PollFd // reused: sleeping must not allocate
	ts  unix.Timespec
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
	return nil
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

func (k *waker) sleep(d time.Duration) {
	k.fds[0] = unix.PollFd{Fd: int32(k.fd), Events: unix.POLLIN}
	k.ts = unix.NsecToTimespec(d.Nanoseconds())
	if n, _ := unix.Ppoll(k.fds[:], &k.ts, nil); n > 0 {
		var buf [8]byte
		_, _ = unix.Read(k.fd, buf[:])
	}
}

var one = [8]byte{1}

func (k *waker) signal() { _, _ = unix.Write(k.fd, one[:]) }
