package testutil

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ferryrdma/ferry/internal/errdefs"
)

// RequireEnv is the variable listing the features a machine promises.
const RequireEnv = "FERRY_TEST_REQUIRE"

// Required reports whether FERRY_TEST_REQUIRE lists feature (or "all").
func Required(feature string) bool {
	list := strings.Split(os.Getenv(RequireEnv), ",")
	for i := range list {
		list[i] = strings.TrimSpace(list[i])
	}
	return slices.Contains(list, feature) || slices.Contains(list, "all")
}

// Skip skips tb with the reason, or fails it with the same reason when
// FERRY_TEST_REQUIRE lists feature.
func Skip(tb testing.TB, feature, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if Required(feature) {
		tb.Fatalf("%s=%s requires %s, but: %s", RequireEnv, os.Getenv(RequireEnv), feature, msg)
		return
	}
	tb.Skipf("%s not available: %s", feature, msg)
}

// SkipIfNotSupported returns when err is nil, skips (or fails, when the
// feature is required) when err wraps ErrNotSupported with a reason, and
// fails on anything else. The bare sentinel fails too: an error that says
// only "not supported" hides why, and a skip must say why.
func SkipIfNotSupported(tb testing.TB, feature string, err error) {
	tb.Helper()
	switch {
	case err == nil:
		return
	case err == errdefs.ErrNotSupported:
		tb.Fatalf("%s: bare ErrNotSupported without a reason", feature)
	case errors.Is(err, errdefs.ErrNotSupported):
		Skip(tb, feature, "%v", err)
	default:
		tb.Fatalf("%s: %v", feature, err)
	}
}

// LeakCheck fails tb if goroutines started during the test are still
// running at its cleanup (after a bounded wait for exiting ones). Call it
// first thing in tests that start engines, workers or servers.
func LeakCheck(tb testing.TB) {
	tb.Helper()
	g := SnapshotGoroutines()
	tb.Cleanup(func() { g.Check(tb) })
}

// Goroutines is the set of goroutines running at one moment.
type Goroutines struct{ baseline goleak.Option }

// SnapshotGoroutines records the goroutines running now.
func SnapshotGoroutines() Goroutines { return Goroutines{goleak.IgnoreCurrent()} }

// leakWait bounds how long Leaked waits for goroutines that are exiting:
// closes return before the runtime retires what they stopped, and a
// loaded machine (CI) makes that slower.
var leakWait = 10 * time.Second

// Leaked returns an error listing the goroutines started since the
// snapshot that still run once leakWait has passed (nil when none do). It
// compares goroutine identities, not counts, so an unrelated goroutine
// ending cannot hide a leak.
func (g Goroutines) Leaked() error {
	deadline := time.Now().Add(leakWait)
	for {
		err := goleak.Find(g.baseline)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Check fails tb if Leaked reports goroutines.
func (g Goroutines) Check(tb testing.TB) {
	tb.Helper()
	if err := g.Leaked(); err != nil {
		tb.Errorf("goroutines leaked: %v", err)
	}
}
