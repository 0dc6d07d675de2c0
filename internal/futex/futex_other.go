//go:build !linux

package futex

import (
	"sync/atomic"
	"time"
)

// Scope says who else may sleep on or wake a word.
type Scope uintptr

const (
	Private Scope = 128
	Shared  Scope = 0
)

// Wait naps where the system has no futex: the word is polled.
func Wait(_ *atomic.Uint32, _ uint32, d time.Duration, _ Scope) {
	time.Sleep(min(d, 50*time.Microsecond))
}

// WakeAll does nothing: waiters poll.
func WakeAll(*atomic.Uint32, Scope) {}
