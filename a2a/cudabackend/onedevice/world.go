package onedevice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/internal/meet"
	"github.com/ferryrdma/ferry/fabric"
)

// Options say how to build a world.
type Options struct {
	Device  cudabackend.Device
	Backend cudabackend.Options // Grid, Block, Timeout, Spin
	// Mapped puts the transport buffers in host memory mapped into the
	// device, so that the in-process "mem" transport, which copies by host
	// address, can carry them (a GPU without an RDMA-capable fabric). A
	// world of one NVLink domain moves no transport bytes over the fabric
	// and needs it not.
	Mapped bool
	// Transport is the fabric transport between ranks (default "mem").
	Transport string
	// Watchdog bounds every step (Run): kernels give up waiting after it
	// and the host stops waiting for them shortly after (default 1 min).
	Watchdog time.Duration
}

// World is W ranks of the CUDA backend in one process. Its methods are
// called from one goroutine.
type World struct {
	Cfg      a2a.Config
	L        a2a.Layout
	Backends []*cudabackend.Backend
	watchdog time.Duration
	dev      cudabackend.Device
	io       []*rankIO
	engines  []*fabric.Engine
	mems     []cudabackend.Memory
}

// rankIO is one rank's caller memory, in device memory.
type rankIO struct {
	x, scales, idx, w, outX, outS, tok, off, y, out, boundM cudabackend.Memory
}

// exchanger is an in-process all-gather for the ranks' backends.
type exchanger struct {
	m *meet.Meeting[[]byte]
	r int
}

func (e exchanger) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	return e.m.Join(ctx, e.r, data)
}

// New builds the ranks of cfg (one engine each) and their caller memory.
// Close releases everything, also after an error of New's.
func New(ctx context.Context, cfg a2a.Config, o Options) (_ *World, err error) {
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	if o.Device == nil {
		return nil, fmt.Errorf("onedevice: no device: %w", a2a.ErrInvalidArgument)
	}
	if o.Transport == "" {
		o.Transport = "mem"
	}
	if o.Watchdog <= 0 {
		o.Watchdog = time.Minute
	}
	if o.Backend.Timeout <= 0 {
		o.Backend.Timeout = o.Watchdog
	}
	W := cfg.WorldSize
	w := &World{Cfg: cfg, L: l, Backends: make([]*cudabackend.Backend, W), watchdog: o.Watchdog, dev: o.Device,
		io: make([]*rankIO, W), engines: make([]*fabric.Engine, W)}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.Close())
		}
	}()
	T, K, L, O := l.MaxTokens, l.ExpertsPerToken, l.LocalExperts, l.OutputRows
	for r := range W {
		io := &rankIO{}
		for _, m := range []struct {
			p *cudabackend.Memory
			n int
		}{{&io.x, T * l.TokenBytes}, {&io.scales, 4 * T * l.Scales}, {&io.idx, 4 * T * K}, {&io.w, 4 * T * K},
			{&io.outX, O * l.TokenBytes}, {&io.outS, 4 * O * l.Scales}, {&io.tok, 4 * L}, {&io.off, 4 * (L + 1)},
			{&io.y, O * l.CombineBytes}, {&io.out, T * l.CombineBytes}, {&io.boundM, 4}} {
			mem, err := o.Device.Alloc(max(m.n, 16))
			if err != nil {
				return nil, err
			}
			w.mems = append(w.mems, mem)
			*m.p = mem
		}
		w.io[r] = io
	}
	nodes := make([]*cudabackend.LocalNode, l.Nodes)
	for n := range nodes {
		if o.Mapped {
			nodes[n] = cudabackend.NewMappedLocalNode(o.Device, l.NVLinkSize)
		} else {
			nodes[n] = cudabackend.NewLocalNode(o.Device, l.NVLinkSize)
		}
	}
	x := meet.New[[]byte](W)
	errs := make([]error, W)
	// A rank that fails releases the others from the exchange.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for r := range W {
		wg.Go(func() {
			defer func() {
				if errs[r] != nil {
					cancel()
				}
			}()
			e, err := fabric.Open(ctx, fabric.Config{Transport: o.Transport, NICs: l.NICsPerGPU, Node: "127.0.0.1",
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				errs[r] = err
				return
			}
			w.engines[r] = e
			c := cfg
			c.Rank = r
			bo := o.Backend
			bo.Engine, bo.Exchange, bo.Device = e, exchanger{x, r}, o.Device
			// The world's ranks share one device and take turns (lock
			// step) or run grids the caller sized to fit together
			// (concurrent): it manages their residency itself.
			bo.Overcommit = true
			bo.Node = nodes[l.Node(r)].Member(r % l.NVLinkSize)
			w.Backends[r], errs[r] = cudabackend.New(ctx, c, bo)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return w, nil
}

// Device is the device the ranks share.
func (w *World) Device() cudabackend.Device { return w.dev }

// Close closes the backends, then their engines, then the caller memory.
func (w *World) Close() error {
	var errs []error
	for r, b := range w.Backends {
		if b != nil {
			if err := b.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close rank %d: %w", r, err))
			}
		}
	}
	for _, e := range w.engines {
		if e != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			errs = append(errs, e.Close(ctx))
			cancel()
		}
	}
	for _, m := range w.mems {
		errs = append(errs, m.Free())
	}
	w.Backends, w.engines, w.mems = nil, nil, nil
	return errors.Join(errs...)
}
