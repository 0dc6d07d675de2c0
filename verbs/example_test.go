package verbs_test

import (
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/verbs"
)

// List the verbs devices of this machine, as fabric-debug info does. On a
// machine without RDMA, Devices returns an error wrapping
// rdma.ErrNotSupported.
func ExampleDevices() {
	devs, err := verbs.Devices()
	if errors.Is(err, rdma.ErrNotSupported) {
		fmt.Println("no verbs devices:", err)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range devs {
		for _, p := range d.Ports {
			fmt.Printf("%s port %d: %s %s %d Gb/s pci=%q\n", d.Name, p.Number, p.State, p.LinkLayer, p.LinkSpeed/1e9, d.PCIAddress)
			for _, g := range p.GIDs {
				fmt.Printf("  gid[%d] %s %s\n", g.Index, g.Addr, g.Type)
			}
		}
	}
}

// Open an engine on the verbs transport: importing the package is what
// makes "verbs" available.
func Example_engine() {
	domains, err := fabric.ChooseTransport("verbs", rdma.DomainOptions{})
	if err != nil {
		fmt.Println("verbs unavailable:", errors.Is(err, rdma.ErrNotSupported))
		return
	}
	fmt.Println(domains.Reason, len(domains.Domains))
}
