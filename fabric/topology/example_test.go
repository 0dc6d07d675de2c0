package topology_test

import (
	"fmt"
	"log"
	"os"

	"github.com/ferryrdma/ferry/fabric/topology"
	"github.com/ferryrdma/ferry/fabric/topology/topotest"
)

// Detect a DGX H100 described by a fake sysfs tree, then place a worker
// for GPU 5 with its nearest NIC, pinned to its first core.
func ExampleDetect() {
	dir, err := os.MkdirTemp("", "topology")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	tree, err := topotest.DGXH100(dir)
	if err != nil {
		log.Fatal(err)
	}
	topo, err := topology.Detect(topology.Spec{SysRoot: tree.Sys, ProcRoot: tree.Proc,
		LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		log.Fatal(err)
	}
	for _, g := range topo.Groups[:2] {
		fmt.Printf("%s %s node %d nics %s cpus %d-%d\n", g.DeviceName(), g.PCIAddress, g.NUMANode,
			g.NICs[0].Name, g.CPUs[0], g.CPUs[len(g.CPUs)-1])
	}
	for _, d := range topo.Dropped {
		fmt.Println("dropped", d.NIC.Name)
	}
	p, err := topo.Place(5, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("cuda:%d on %s, worker on cpu %d\n", p.Device, p.NICs[0].Name, p.WorkerCPU)
	// Output:
	// cuda:0 0000:13:00.0 node 0 nics mlx5_0 cpus 0-13
	// cuda:1 0000:14:00.0 node 0 nics mlx5_1 cpus 14-27
	// dropped mlx5_8
	// dropped mlx5_9
	// cuda:5 on mlx5_5, worker on cpu 70
}
