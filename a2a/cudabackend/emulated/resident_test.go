package emulated_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/cudabackend/emulated"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
)

// TestEmuConcurrentContexts checks the co-residency rules
// (cudabackend.ResidentDevice) on emulated devices that hold 8 blocks each, one
// per rank: a grid above the device is refused naming the size to use;
// two contexts of 4 blocks share the devices and run their iterations at
// the same time, each on its own stream; once they closed, a context of 6
// takes their place and one of 3 beside it is refused, naming the 2
// blocks left.
func TestEmuConcurrentContexts(t *testing.T) {
	cfg := a2a.Config{WorldSize: 2, MaxTokens: 6, Hidden: 16, Scales: 2, DispatchType: a2a.FP8, CombineType: a2a.BF16,
		Experts: 4, ExpertsPerToken: 2, PrivateTokens: 1}
	devs := []emulated.Device{emulated.NewDeviceHolding(8), emulated.NewDeviceHolding(8)}
	onDevs := func() func() cudabackend.Device {
		r := 0
		return func() cudabackend.Device { d := devs[r%len(devs)]; r++; return d }
	}
	// Each world's ranks take one device each (in whatever order their
	// goroutines start); both devices hold the same, which is all the
	// rules need.
	refused := func(grid int, want string) {
		t.Helper()
		_, err := buildWorld(t, cfg, "mem", cudabackend.Options{Grid: grid, Block: 32}, onDevs())
		if !errors.Is(err, a2a.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Fatalf("grid %d: %v, want ErrInvalidConfig saying %q", grid, err, want)
		}
		t.Logf("grid %d refused: %v", grid, err)
	}
	refused(9, "use Options.Grid <= 8")
	var a, b *world
	t.Run("two contexts at once", func(t *testing.T) {
		a = newWorldOn(t, cfg, "mem", cudabackend.Options{Grid: 4, Block: 32}, onDevs())
		b = newWorldOn(t, cfg, "mem", cudabackend.Options{Grid: 4, Block: 32}, onDevs())
		for name, w := range map[string]*world{"a": a, "b": b} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				a2atest.Run(t, cfg, &a2atest.World{Contexts: w.ctxs, BeforeIteration: w.poison, Timeout: time.Minute}, 9, 2)
			})
		}
	})
	// The subtest's cleanup closed a and b: their blocks are back.
	c := newWorldOn(t, cfg, "mem", cudabackend.Options{Grid: 6, Block: 32}, onDevs())
	refused(3, "use Options.Grid <= 2")
	// A caller that runs the contexts in lock step opts out of the rule.
	if _, err := buildWorld(t, cfg, "mem", cudabackend.Options{Grid: 8, Block: 32, Overcommit: true}, onDevs()); err != nil {
		t.Fatalf("overcommitted grid of 8 beside 6: %v", err)
	}
	a2atest.Run(t, cfg, &a2atest.World{Contexts: c.ctxs, BeforeIteration: c.poison, Timeout: time.Minute}, 10, 1)
}
