package fabricbench_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/ferryrdma/ferry/bench/internal/fabricbench"
)

// A loopback run over the in-process mem provider: a server engine writes
// into a client engine's buffer, and the client checks the verified case.
func ExampleLoopback() {
	rep, err := fabricbench.Loopback(context.Background(), fabricbench.Spec{
		Provider:  "mem",
		Workloads: []string{fabricbench.Single},
		Sizes:     []uint64{4 << 10},
		Verify:    true,
		Iters:     3,
		Buffer:    8 << 20,
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range rep.Cases {
		fmt.Printf("%s %s: %d iterations, verified=%v\n", c.Workload, fabricbench.FormatBytes(c.Bytes), c.Iters, c.Verified)
	}
	// Output:
	// single 4 KiB: 3 iterations, verified=true
}

// A run printed as fabric-debug prints it: the header, a row per case as
// it completes, and JSON records in a file. The figures depend on the
// machine, so nothing is checked.
func ExamplePrinter() {
	p, err := fabricbench.NewPrinter(fabricbench.Output{JSON: "results.jsonl", Plot: "bandwidth.png"}, os.Args, os.Stdout, os.Stderr)
	if err != nil {
		log.Fatal(err)
	}
	rep, err := fabricbench.Loopback(context.Background(), fabricbench.Spec{Provider: "shm", Verify: true}, p)
	if err := p.Finish(rep, err); err != nil {
		log.Fatal(err)
	}
}
