package cudabackend_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// One rank of a job on a GPU: the kernels are compiled by NVRTC for the
// device (and cached), the transport buffers are device memory registered
// with the engine (a provider with GPU support: efa or verbs), and the
// Context drives the four kernels per iteration. Needs a CUDA driver and
// a GPU-capable fabric, so it is compiled but not run here.
func ExampleNewDriverDevice() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := rendezvous.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := rendezvous.Join(ctx, rc)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	dev, err := cuda.GetDevice(0)
	if err != nil {
		fmt.Println(err) // wraps cuda.ErrNotSupported without a driver
		return
	}
	cctx, err := dev.PrimaryContext()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cctx.Close()
	d, err := cudabackend.NewDriverDevice(cctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := a2a.Config{WorldSize: g.WorldSize(), Rank: g.Rank(), MaxTokens: 128, Hidden: 7168, Scales: 56,
		DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 256, ExpertsPerToken: 8}
	e, err := fabric.Open(ctx, fabric.Config{Transport: "auto"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close(ctx)
	b, err := cudabackend.New(ctx, cfg, cudabackend.Options{Engine: e, Exchange: g, Device: d,
		Node: cudabackend.NewLocalNode(d, 1).Member(0)})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := a2a.New(cfg, b)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	fmt.Println("specialised build:", func() bool { _, ok := cudabackend.ShapeOf(c.Layout()); return ok }())
}

// A rank of an NVLink domain whose ranks are processes (one per GPU of a
// machine): its send and receive buffers are CUDA VMM allocations that
// ProcessNode exports to the domain's other processes over unix sockets,
// mapping theirs in return, when New shares the buffers. Every rank of the
// world must use a ProcessNode. Needs a CUDA driver, so it is compiled but
// not run here.
func ExampleNewProcessNode() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := rendezvous.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := rendezvous.Join(ctx, rc)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	dev, err := cuda.GetDevice(g.LocalRank())
	if err != nil {
		fmt.Println(err)
		return
	}
	cctx, err := dev.PrimaryContext()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cctx.Close()
	d, err := cudabackend.NewDriverDevice(cctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Eight GPUs of this machine in one domain: the fabric carries only
	// the count rows and signals, in host memory.
	cfg := a2a.Config{WorldSize: g.WorldSize(), Rank: g.Rank(), NVLinkSize: g.WorldSize(), MaxTokens: 128,
		Hidden: 7168, Scales: 56, DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 256, ExpertsPerToken: 8}
	node, err := cudabackend.NewProcessNode(cfg, g, d)
	if err != nil {
		fmt.Println(err)
		return
	}
	e, err := fabric.Open(ctx, fabric.Config{Transport: "tcp;ofi_rxm", Node: "127.0.0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close(ctx)
	b, err := cudabackend.New(ctx, cfg, cudabackend.Options{Engine: e, Exchange: g, Device: d, Node: node})
	if err != nil {
		fmt.Println(err) // New closed the node
		return
	}
	c, err := a2a.New(cfg, b)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close() // closes the backend, then the node's mappings
	fmt.Println("node ranks:", c.Layout().NVLinkSize)
}
