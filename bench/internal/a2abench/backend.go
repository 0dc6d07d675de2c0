package a2abench

import (
	"context"
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/cudabackend/emulated"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
)

// Backends Run knows.
const (
	BackendHost    = "host"     // Go loops over host memory (package a2a/host)
	BackendCUDA    = "cuda"     // the CUDA kernels on this rank's GPU (package a2a/cudabackend)
	BackendCUDAEmu = "cuda-emu" // the same backend, kernels on the CPU emulator (a2a/cudabackend/emulated)
)

// localRanker is implemented by groups that know a rank's place on its
// machine (rendezvous.Group): it picks the rank's GPU.
type localRanker interface{ LocalRank() int }

// newBackend builds spec.Backend for this rank. close releases what it
// built beside the backend (the CUDA context), after the backend.
func newBackend(ctx context.Context, spec Spec, cfg a2a.Config, l *a2a.Layout, eng *fabric.Engine, g Group,
	opt Options) (b a2a.Backend, close func() error, err error) {
	close = func() error { return nil }
	node := opt.Node
	if node == nil && spec.Backend == BackendHost {
		if node, err = host.NewProcessNode(cfg, g); err != nil {
			return nil, close, err
		}
	}
	me := cfg.Rank % l.NVLinkSize
	copt := cudabackend.Options{Engine: eng, Exchange: g, Grid: spec.Grid, Block: spec.Block, Timeout: spec.Timeout,
		Spin: spec.Spin}
	switch spec.Backend {
	case BackendHost:
		b, err = host.New(ctx, cfg, host.Options{Engine: eng, Exchange: g, Node: node, ReduceThreads: spec.ReduceThreads,
			Doorbells: spec.Doorbells})
	case BackendCUDAEmu:
		dev := emulated.NewDevice()
		copt.Device = dev
		if node != nil {
			copt.Node = emulated.NewHostNode(node, me)
		} else if copt.Node, err = cudabackend.NewProcessNode(cfg, g, dev); err != nil {
			return nil, close, err
		}
		b, err = cudabackend.New(ctx, cfg, copt)
	case BackendCUDA:
		dev, cclose, err := openGPU(cfg, g)
		if err != nil {
			return nil, close, err
		}
		close = cclose
		copt.Device = dev
		if l.NVLinkSize == 1 {
			copt.Node = cudabackend.NewLocalNode(dev, 1).Member(0)
		} else if copt.Node, err = cudabackend.NewProcessNode(cfg, g, dev); err != nil {
			// Node ranks are processes: their buffers are CUDA VMM
			// allocations, exported to each other over unix sockets.
			return nil, close, errors.Join(err, close())
		}
		if b, err = cudabackend.New(ctx, cfg, copt); err != nil {
			return nil, close, errors.Join(err, close())
		}
		return b, close, nil
	}
	return b, close, err
}

// openGPU returns the device of this rank's GPU (picked by its local
// rank) and the close of its context.
func openGPU(cfg a2a.Config, g Group) (*cudabackend.DriverDevice, func() error, error) {
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, nil, err
	}
	if n == 0 {
		return nil, nil, fmt.Errorf("bench: backend cuda: no CUDA device: %w", fabric.ErrNotSupported)
	}
	ord := cfg.Rank
	if lr, ok := g.(localRanker); ok {
		ord = lr.LocalRank()
	}
	d, err := cuda.GetDevice(ord % n)
	if err != nil {
		return nil, nil, err
	}
	cctx, err := d.PrimaryContext()
	if err != nil {
		return nil, nil, err
	}
	dev, err := cudabackend.NewDriverDevice(cctx)
	if err != nil {
		return nil, nil, errors.Join(err, cctx.Close())
	}
	return dev, cctx.Close, nil
}
