package a2atest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
)

// SetActive has every active rank's context take membership generation
// gen at once (with an exchange among the members when x is not nil) and
// fails tb when any of them refuses it.
func SetActive(tb testing.TB, ctxs []*a2a.Context, gen uint32, active []bool, x *Exchange) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make([]error, len(ctxs))
	var wg sync.WaitGroup
	i := 0
	for r, c := range ctxs {
		if !active[r] {
			continue
		}
		m := a2a.Membership{Generation: gen, Active: active}
		if x != nil {
			m.Exchange = x.Member(i)
		}
		i++
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = c.SetActiveRanks(ctx, m)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			tb.Fatalf("rank %d: set active ranks %v (generation %d): %v", r, active, gen, err)
		}
	}
}
