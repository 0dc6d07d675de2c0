package emulated_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/cudabackend/emulated"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	"github.com/ferryrdma/ferry/fabric"
)

// Two ranks in one process, each with its own engine over the in-process
// "mem" provider, run the CUDA backend's kernels on the CPU emulator:
// each dispatches two tokens to the other rank's expert and combines the
// results back. In a job of processes, use a rendezvous.Group as the
// Exchanger and a cudabackend.ProcessNode over the emulator device for the
// domain (its memory is memfds, which node peers map).
// Needs g++ (the first run builds the kernels, later runs take them from
// the cache).
func ExampleNewDevice() {
	cfg := a2a.Config{WorldSize: 2, MaxTokens: 2, Hidden: 4, DispatchType: a2a.FP32, CombineType: a2a.FP32,
		Experts: 2, ExpertsPerToken: 1}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x := a2atest.NewExchange(2) // in a job: a rendezvous.Group
	var wg sync.WaitGroup
	counts := make([][]int32, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := fabric.Open(ctx, fabric.Config{Transport: "mem", Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				fmt.Println(err)
				return
			}
			defer e.Close(ctx)
			c := cfg
			c.Rank = r
			dev := emulated.NewDevice()              // each rank its own emulated GPU
			node := cudabackend.NewLocalNode(dev, 1) // one rank per NVLink domain
			b, err := cudabackend.New(ctx, c, cudabackend.Options{Engine: e, Exchange: x.Member(r), Device: dev, Node: node.Member(0)})
			if err != nil {
				fmt.Println(err)
				return
			}
			a, err := a2a.New(c, b)
			if err != nil {
				fmt.Println(err)
				return
			}
			defer a.Close()
			l := a.Layout()
			in := a2a.DispatchInput{Tokens: 2, X: make([]byte, 2*l.TokenBytes), Indices: []uint32{uint32(1 - r), uint32(1 - r)}}
			out := a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), X: make([]byte, l.OutputRows*l.TokenBytes)}
			if err := a.Dispatch(ctx, &in, &out); err != nil {
				fmt.Println(err)
				return
			}
			counts[r] = out.ExpertTokens
			y := a2a.CombineInput{Y: make([]byte, l.OutputRows*l.CombineBytes)}
			res := a2a.CombineOutput{Out: make([]byte, 2*l.CombineBytes), Weights: []float32{1, 1}}
			if err := a.Combine(ctx, &y, &res); err != nil {
				fmt.Println(err)
			}
		}()
	}
	wg.Wait()
	fmt.Println("tokens received per local expert:", counts[0], counts[1])
	// Output: tokens received per local expert: [2] [2]
}
