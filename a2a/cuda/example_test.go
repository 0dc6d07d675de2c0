package cuda_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	a2acuda "github.com/ferryrdma/ferry/a2a/cuda"
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
	d, err := a2acuda.NewDriverDevice(cctx)
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
	b, err := a2acuda.New(ctx, cfg, a2acuda.Options{Engine: e, Exchange: g, Device: d,
		Node: a2acuda.NewLocalNode(d, 1).Member(0)})
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
	fmt.Println("specialised build:", func() bool { _, ok := a2acuda.ShapeOf(c.Layout()); return ok }())
}
