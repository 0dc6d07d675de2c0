package emulated_test

import (
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/cudabackend/emulated"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	_ "github.com/ferryrdma/ferry/efa"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/testutil"
	_ "github.com/ferryrdma/ferry/memfabric"
)

// requireGxx skips when no C++ compiler can build the emulated kernels,
// unless FERRY_TEST_REQUIRE lists "cudaemu".
func requireGxx(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("g++"); err != nil {
		testutil.Skip(t, "cudaemu", "no g++ here: the CUDA emulator builds kernels with a C++20 compiler")
	}
}

// world is W ranks of the CUDA backend on the emulator in one process,
// each with its own engine; node ranks share plain pointers.
type world struct {
	ctxs     []*a2a.Context
	backends []*cudabackend.Backend
	members  []*cudabackend.LocalMember
	engines  []*fabric.Engine
	l        a2a.Layout
}

// poison overwrites every rank's transport buffers (not the sync slots
// at the tail of the receive buffer): 0xA5 on even iterations, 0x5A on
// odd ones. Only call it while every rank is idle.
func (w *world) poison(it int) {
	b := byte(0xa5)
	if it%2 == 1 {
		b = 0x5a
	}
	for q, m := range w.members {
		if w.ctxs[q] == nil {
			continue // a lost rank's memory may be gone
		}
		s, r := m.Buffers()
		for _, buf := range [][]byte{s.Bytes()[:w.l.SendBytes], r.Bytes()[:w.l.RecvBytes]} {
			for i := range buf {
				buf[i] = b
			}
		}
	}
}

func newWorld(t testing.TB, cfg a2a.Config, transport string, opt cudabackend.Options) *world {
	t.Helper()
	return newWorldOn(t, cfg, transport, opt, func() cudabackend.Device { return emulated.NewDevice() })
}

// newWorldOn is newWorld with each rank's device made by newDevice.
func newWorldOn(t testing.TB, cfg a2a.Config, transport string, opt cudabackend.Options, newDevice func() cudabackend.Device) *world {
	t.Helper()
	w, err := buildWorld(t, cfg, transport, opt, newDevice)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// buildWorld is newWorldOn returning the ranks' errors from New.
func buildWorld(t testing.TB, cfg a2a.Config, transport string, opt cudabackend.Options, newDevice func() cudabackend.Device) (*world, error) {
	t.Helper()
	requireGxx(t)
	l, err := cfg.Layout()
	if err != nil {
		t.Fatal(err)
	}
	W := cfg.WorldSize
	dev := emulated.NewDevice() // allocates the node domains' memory
	x := a2atest.NewExchange(W)
	w := &world{ctxs: make([]*a2a.Context, W), backends: make([]*cudabackend.Backend, W), members: make([]*cudabackend.LocalMember, W), l: l}
	nodes := make([]*cudabackend.LocalNode, l.Nodes)
	for n := range nodes {
		nodes[n] = cudabackend.NewLocalNode(dev, l.NVLinkSize)
	}
	engines := make([]*fabric.Engine, W)
	w.engines = engines
	errs := make([]error, W)
	t.Cleanup(func() {
		for r, c := range w.ctxs {
			if c != nil {
				if err := c.Close(); err != nil {
					t.Errorf("close rank %d: %v", r, err)
				}
			}
		}
		for _, e := range engines {
			if e != nil {
				cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if n := e.Regions(); n != 0 {
					t.Errorf("%d regions still registered", n)
				}
				if err := e.Close(cctx); err != nil && !errors.Is(err, fabric.ErrClosed) {
					t.Errorf("close engine: %v", err)
				}
				cancel()
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for r := range W {
		w.members[r] = nodes[l.Node(r)].Member(r % l.NVLinkSize)
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := fabric.Open(ctx, fabric.Config{Transport: transport, NICs: l.NICsPerGPU, Node: "127.0.0.1",
				LivenessInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				errs[r] = err
				return
			}
			engines[r] = e
			c := cfg
			c.Rank = r
			o := opt
			// Each rank is its own emulated GPU (as in a job), so the
			// scope checker holds the kernels to sys scope between ranks.
			o.Engine, o.Exchange, o.Device, o.Node = e, x.Member(r), newDevice(), w.members[r]
			b, err := cudabackend.New(ctx, c, o)
			if err != nil {
				errs[r] = err
				return
			}
			w.backends[r] = b
			w.ctxs[r], errs[r] = a2a.New(c, b)
		}()
	}
	wg.Wait()
	return w, errors.Join(errs...)
}
