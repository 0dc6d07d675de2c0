package fabric

import (
	"context"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// backoff paces a waiter that polls memory another goroutine updates: spin
// a little, then yield, then sleep with a growing interval (capped), so
// waiting costs little CPU on a 2-core machine but reacts fast when the
// answer is near.
type backoff struct {
	n     int
	sleep time.Duration
}

const (
	backoffSpins    = 64
	backoffYields   = 256
	backoffMinSleep = 5 * time.Microsecond
	backoffMaxSleep = 500 * time.Microsecond
)

// wait pauses once; it returns ctx's error when ctx has ended.
func (b *backoff) wait(ctx context.Context) error {
	b.n++
	switch {
	case b.n < backoffSpins:
		return nil
	case b.n < backoffSpins+backoffYields:
		if b.n&15 == 0 && ctx.Err() != nil {
			return ctxErr(ctx)
		}
		runtime.Gosched()
		return nil
	}
	if ctx.Err() != nil {
		return ctxErr(ctx)
	}
	if b.sleep == 0 {
		b.sleep = backoffMinSleep
	} else if b.sleep < backoffMaxSleep {
		b.sleep *= 2
	}
	fineSleep(b.sleep)
	return nil
}

// fineSleep sleeps d. Below a millisecond it uses nanosleep, because the Go
// runtime's timers round short sleeps up to about a millisecond here.
func fineSleep(d time.Duration) {
	if d >= time.Millisecond {
		time.Sleep(d)
		return
	}
	ts := unix.NsecToTimespec(d.Nanoseconds())
	_ = unix.Nanosleep(&ts, nil)
}
