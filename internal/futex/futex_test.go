package futex

import (
	"sync/atomic"
	"testing"
	"time"
)

// A sleeper on a word that changes is woken long before its timeout.
func TestWakeAllEndsWait(t *testing.T) {
	for _, s := range []Scope{Private, Shared} {
		var w atomic.Uint32
		done := make(chan time.Duration)
		go func() {
			start := time.Now()
			for w.Load() == 0 {
				Wait(&w, 0, 10*time.Second, s)
			}
			done <- time.Since(start)
		}()
		time.Sleep(10 * time.Millisecond)
		w.Store(1)
		WakeAll(&w, s)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("scope %d: the waiter slept on after WakeAll", s)
		}
	}
}

// Wait returns at once when the word no longer holds val.
func TestWaitSeesChangedWord(t *testing.T) {
	var w atomic.Uint32
	w.Store(2)
	start := time.Now()
	Wait(&w, 1, 10*time.Second, Private)
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("Wait on a changed word slept %v", el)
	}
}
