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
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range rep.Cases {
		fmt.Printf("%s %s verify=%v verified=%v\n", c.Workload, fabricbench.FormatBytes(c.Bytes), c.Verify, c.Verified)
	}
	// Output:
	// single 10000 B verify=true verified=true
	// single 4 KiB verify=false verified=false
}

// The same run as a table on stdout and JSON in a file, as fabric-debug
// prints it. The figures depend on the machine, so nothing is checked.
func ExampleReport_Emit() {
	rep, err := fabricbench.Loopback(context.Background(), fabricbench.Spec{Provider: "shm", Verify: true})
	if err != nil {
		log.Fatal(err)
	}
	if err := rep.Emit(fabricbench.Output{JSON: "results.json", Plot: "bandwidth.png"}, os.Stdout, os.Stderr); err != nil {
		log.Fatal(err)
	}
}
