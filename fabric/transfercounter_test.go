package fabric

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestTransferCounterWakes checks that waits past their spins sleep until
// a completion wakes them: several waiters at once, for different counts,
// each released by the completion that reaches its count, and a deadline
// still ends a wait that no completion satisfies.
func TestTransferCounterWakes(t *testing.T) {
	c := new(TransferCounter)
	done := Count(c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Wait(ctx, int64(1+i%3))
		}()
	}
	// Let the waiters run out of spins and yields and go to sleep.
	deadline := time.Now().Add(10 * time.Second)
	for c.sleepers.Load() < int32(len(errs)) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := c.sleepers.Load(); got != int32(len(errs)) {
		t.Fatalf("%d of %d waits asleep", got, len(errs))
	}
	for range 3 {
		done.finishDirect(nil)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("wait %d: %v", i, err)
		}
	}
	if c.sleepers.Load() != 0 {
		t.Errorf("%d sleepers left", c.sleepers.Load())
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if err := c.Wait(short, 4); !errors.Is(err, ErrTimeout) {
		t.Errorf("wait for a completion that never comes: %v, want ErrTimeout", err)
	}
}
