package topology

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// sysfsNICs lists the RDMA devices under <sys>/class/infiniband: EFA and
// verbs devices alike, each with its PCI function and port 1's rate.
func sysfsNICs(sysRoot string, tree *pciTree) ([]NIC, error) {
	dir := filepath.Join(sysRoot, "class", "infiniband")
	ents, err := os.ReadDir(dir)
	if isNotExist(err) {
		return nil, nil // no RDMA subsystem: no NIC
	}
	if err != nil {
		return nil, &FileError{Path: dir, Err: err}
	}
	var out []NIC
	for _, e := range ents {
		base := filepath.Join(dir, e.Name())
		n := NIC{Name: e.Name(), NUMANode: -1}
		if target, err := os.Readlink(filepath.Join(base, "device")); err == nil {
			n.PCIAddress = normalizeAddr(filepath.Base(target))
		}
		n.LinkSpeed = portRate(filepath.Join(base, "ports"))
		out = append(out, n)
	}
	return out, nil
}

// portRate reads the rate of the device's first port ("100 Gb/sec (4X EDR)")
// in bits per second; 0 when unknown.
func portRate(portsDir string) uint64 {
	ents, err := os.ReadDir(portsDir)
	if err != nil || len(ents) == 0 {
		return 0
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Slice(names, func(i, j int) bool {
		a, _ := strconv.Atoi(names[i])
		b, _ := strconv.Atoi(names[j])
		return a < b
	})
	s, err := readTrim(filepath.Join(portsDir, names[0], "rate"))
	if err != nil {
		return 0
	}
	return ParseRate(s)
}

// ParseRate parses an RDMA port rate as sysfs prints it ("100 Gb/sec (4X
// EDR)", "25 Gb/sec", "2.5 Gb/sec") into bits per second; 0 if unparsable.
func ParseRate(s string) uint64 {
	f := strings.Fields(s)
	if len(f) < 2 {
		return 0
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || v < 0 {
		return 0
	}
	switch strings.ToLower(strings.TrimSuffix(f[1], "/sec")) {
	case "gb":
		return uint64(v * 1e9)
	case "mb":
		return uint64(v * 1e6)
	case "tb":
		return uint64(v * 1e12)
	}
	return 0
}

// completeNIC fills in what sysfs knows about a NIC's PCI function.
func completeNIC(n *NIC, tree *pciTree) {
	n.PCIAddress = normalizeAddr(n.PCIAddress)
	if d, ok := tree.byAddr[n.PCIAddress]; ok && n.PCIAddress != "" {
		if n.VendorID == 0 {
			n.VendorID, n.DeviceID = d.vendor, d.device
		}
		n.NUMANode = tree.numaOf(d)
	}
	if n.Transport == "" {
		n.Transport = "verbs"
		if n.VendorID == VendorAmazon {
			n.Transport = "efa"
		}
	}
}

type pciID struct{ vendor, device uint16 }

func (id pciID) String() string { return fmt.Sprintf("%04x:%04x", id.vendor, id.device) }

// selectNICs keeps EFA devices when there are any, then the most common PCI
// id. NICs without a PCI function (loopback, injected virtual devices) are
// returned apart: they can serve only a host group.
func selectNICs(all []NIC) (kept, virtual []NIC, dropped []Dropped) {
	var pci []NIC
	efa := false
	for _, n := range all {
		if n.PCIAddress == "" || n.Loopback {
			virtual = append(virtual, n)
			continue
		}
		pci = append(pci, n)
		efa = efa || n.VendorID == VendorAmazon
	}
	if efa {
		var only []NIC
		for _, n := range pci {
			if n.VendorID == VendorAmazon {
				only = append(only, n)
			} else {
				dropped = append(dropped, Dropped{n, "not an EFA device, and EFA devices are present"})
			}
		}
		pci = only
	}
	count := map[pciID]int{}
	speed := map[pciID]uint64{}
	for _, n := range pci {
		id := pciID{n.VendorID, n.DeviceID}
		count[id]++
		speed[id] += n.LinkSpeed
	}
	var best pciID
	bestN := 0
	for id, c := range count {
		// Ties go to the faster model, then to the lower id, so the choice
		// does not depend on map order.
		better := c > bestN ||
			(c == bestN && (speed[id] > speed[best] ||
				(speed[id] == speed[best] && (id.vendor < best.vendor || (id.vendor == best.vendor && id.device < best.device)))))
		if better {
			best, bestN = id, c
		}
	}
	for _, n := range pci {
		if id := (pciID{n.VendorID, n.DeviceID}); id != best {
			dropped = append(dropped, Dropped{n, fmt.Sprintf("pci id %v differs from the compute nics' %v (%d of them)", id, best, bestN)})
			continue
		}
		kept = append(kept, n)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].PCIAddress < kept[j].PCIAddress })
	return kept, virtual, dropped
}
