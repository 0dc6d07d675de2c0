package fabric

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestTransferCounterWakes checks that a wait past its spins sleeps until
// a completion wakes it, that concurrent waits (all asleep on the futex
// word) are each released by the completion that reaches their count,
// and that a deadline still ends a wait no completion satisfies.
func TestTransferCounterWakes(t *testing.T) {
	c := new(TransferCounter)
	done := Count(c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	asleep := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for c.sleepers.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if c.sleepers.Load() == 0 {
			t.Fatal("no wait went to sleep")
		}
	}

	// One waiter: asleep, woken by the completion.
	errc := make(chan error, 1)
	go func() { errc <- c.Wait(ctx, 1) }()
	asleep()
	done.finishDirect(nil)
	if err := <-errc; err != nil {
		t.Fatalf("single wait: %v", err)
	}

	// Several at once, for counts 2..4.
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Wait(ctx, int64(2+i%3))
		}()
	}
	asleep()
	for range 3 {
		done.finishDirect(nil)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("wait %d: %v", i, err)
		}
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if err := c.Wait(short, 5); !errors.Is(err, ErrTimeout) {
		t.Errorf("wait for a completion that never comes: %v, want ErrTimeout", err)
	}
	if n := c.sleepers.Load(); n != 0 {
		t.Errorf("%d sleepers left", n)
	}
}
