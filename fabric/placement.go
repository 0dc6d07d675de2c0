package fabric

import (
	"fmt"

	"github.com/ferryrdma/ferry/fabric/topology"
)

// PlaceGroups builds one GroupSpec per CUDA ordinal in gpus from a detected
// topology: the GPU with its nearest nics NICs among the domains choice can
// open (matched by PCI address, else by name), its worker pinned to the
// first physical core of its NUMA slice before the NICs are opened.
func PlaceGroups(choice Choice, topo *topology.Topology, gpus []int, nics int) ([]GroupSpec, error) {
	var specs []GroupSpec
	for _, g := range gpus {
		p, err := topo.Place(g, nics)
		if err != nil {
			return nil, fmt.Errorf("place gpu %d: %w", g, err)
		}
		spec := GroupSpec{Device: CUDADevice(g), Pin: true, CPU: p.WorkerCPU}
		for _, n := range p.NICs {
			d, ok := matchDomain(choice.Domains, n)
			if !ok {
				return nil, fmt.Errorf("place gpu %d: nic %s (%s) is not a %s domain: %w", g, n.Name, n.PCIAddress, choice.Transport, ErrInvalidArgument)
			}
			d.Index = len(spec.Domains)
			spec.Domains = append(spec.Domains, d)
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

func matchDomain(ds []DomainInfo, n topology.NIC) (DomainInfo, bool) {
	for _, d := range ds {
		if n.PCIAddress != "" && d.PCIAddress == n.PCIAddress {
			return d, true
		}
	}
	for _, d := range ds {
		if d.Name == n.Name {
			return d, true
		}
	}
	return DomainInfo{}, false
}

// TopologyNICs adapts a transport's domains to topology.Spec.NICs, so the
// topology groups exactly the NICs the engine can open.
func TopologyNICs(choice Choice) func() ([]topology.NIC, error) {
	return func() ([]topology.NIC, error) {
		out := make([]topology.NIC, 0, len(choice.Domains))
		for _, d := range choice.Domains {
			out = append(out, topology.NIC{Name: d.Name, PCIAddress: d.PCIAddress, LinkSpeed: d.LinkSpeed,
				NUMANode: d.NUMANode, Transport: choice.Transport})
		}
		return out, nil
	}
}
