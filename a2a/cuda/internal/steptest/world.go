package steptest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cuda"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	"github.com/ferryrdma/ferry/fabric"
)

// Options say how to build a world.
type Options struct {
	Device  cuda.Device
	Backend cuda.Options // Grid, Block, Timeout
	// Mapped puts the transport buffers in host memory mapped into the
	// device, so that the in-process "mem" transport, which copies by host
	// address, can carry them (a GPU without an RDMA-capable fabric).
	Mapped bool
	// Transport is the fabric transport between ranks (default "mem").
	Transport string
}

// World is W ranks of the CUDA backend in one process.
type World struct {
	Cfg      a2a.Config
	L        a2a.Layout
	Backends []*cuda.Backend
	dev      cuda.Device
	io       []*rankIO
}

// rankIO is one rank's caller memory, in device memory.
type rankIO struct {
	x, scales, idx, w, outX, outS, tok, off, y, out, boundM cuda.Memory
}

// NewWorld builds the ranks of cfg (one engine each) and their caller
// memory; everything is released at the end of the test.
func NewWorld(tb testing.TB, cfg a2a.Config, o Options) *World {
	tb.Helper()
	l, err := cfg.Layout()
	if err != nil {
		tb.Fatal(err)
	}
	if o.Transport == "" {
		o.Transport = "mem"
	}
	W := cfg.WorldSize
	w := &World{Cfg: cfg, L: l, Backends: make([]*cuda.Backend, W), dev: o.Device, io: make([]*rankIO, W)}
	x := a2atest.NewExchange(W)
	nodes := make([]*cuda.LocalNode, l.Nodes)
	for n := range nodes {
		if o.Mapped {
			nodes[n] = cuda.NewMappedLocalNode(o.Device, l.NVLinkSize)
		} else {
			nodes[n] = cuda.NewLocalNode(o.Device, l.NVLinkSize)
		}
	}
	engines := make([]*fabric.Engine, W)
	var mems []cuda.Memory
	tb.Cleanup(func() {
		for r, b := range w.Backends {
			if b != nil {
				if err := b.Close(); err != nil {
					tb.Errorf("close rank %d: %v", r, err)
				}
			}
		}
		for _, e := range engines {
			if e != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := e.Close(ctx); err != nil {
					tb.Errorf("close engine: %v", err)
				}
				cancel()
			}
		}
		for _, m := range mems {
			_ = m.Free()
		}
	})
	alloc := func(n int) cuda.Memory {
		m, err := o.Device.Alloc(max(n, 16))
		if err != nil {
			tb.Fatal(err)
		}
		mems = append(mems, m)
		return m
	}
	T, K, L, O := l.MaxTokens, l.ExpertsPerToken, l.LocalExperts, l.OutputRows
	for r := range W {
		w.io[r] = &rankIO{x: alloc(T * l.TokenBytes), scales: alloc(4 * T * l.Scales), idx: alloc(4 * T * K),
			w: alloc(4 * T * K), outX: alloc(O * l.TokenBytes), outS: alloc(4 * O * l.Scales), tok: alloc(4 * L),
			off: alloc(4 * (L + 1)), y: alloc(O * l.CombineBytes), out: alloc(T * l.CombineBytes), boundM: alloc(4)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	errs := make([]error, W)
	var wg sync.WaitGroup
	for r := range W {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := fabric.Open(ctx, fabric.Config{Transport: o.Transport, NICs: l.NICsPerGPU, Node: "127.0.0.1",
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				errs[r] = err
				return
			}
			engines[r] = e
			c := cfg
			c.Rank = r
			bo := o.Backend
			bo.Engine, bo.Exchange, bo.Device = e, x.Member(r), o.Device
			bo.Node = nodes[l.Node(r)].Member(r % l.NVLinkSize)
			w.Backends[r], errs[r] = cuda.New(ctx, c, bo)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
	return w
}

// status checks the last launch of phase on every rank.
func (w *World) status(phase cuda.Phase, epoch uint32) error {
	for r, b := range w.Backends {
		got, err := b.Status(phase)
		if err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
		if got != epoch {
			return fmt.Errorf("rank %d %v: epoch %d, want %d", r, phase, got, epoch)
		}
	}
	return nil
}
