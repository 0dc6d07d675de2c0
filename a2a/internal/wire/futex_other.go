//go:build !linux

package wire

import (
	"sync/atomic"
	"time"
)

// futexWait naps instead where the system has no futex: the bell is
// polled.
func futexWait(_ *atomic.Uint32, _ uint32, d time.Duration) { time.Sleep(min(d, 50*time.Microsecond)) }

func futexWake(*atomic.Uint32) {}
