package topology

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// DefaultLoopback are the transports a host group offers when the machine
// has no RDMA NIC: libfabric's tcp;ofi_rxm and shm run over loopback.
var DefaultLoopback = []string{"tcp;ofi_rxm", "shm"}

// Spec says where Detect reads the machine from. The zero value reads the
// real /sys and /proc, finds GPUs in sysfs and NICs under
// /sys/class/infiniband. It is plain data plus optional funcs; every field
// is optional.
type Spec struct {
	// SysRoot and ProcRoot replace "/sys" and "/proc" (tests point them at
	// fake trees).
	SysRoot  string
	ProcRoot string
	// GPUs returns the visible GPUs in CUDA ordinal order, for example
	// from the cuda package; the driver has already applied
	// CUDA_VISIBLE_DEVICES. Nil means: NVIDIA GPUs from sysfs, ordered by
	// PCI address, filtered by CUDA_VISIBLE_DEVICES here.
	GPUs func() ([]GPU, error)
	// NICs returns the NICs a provider can open (name, PCI address, link
	// speed; the rest is filled in from sysfs). Nil means the RDMA devices
	// under <SysRoot>/class/infiniband.
	NICs func() ([]NIC, error)
	// LookupEnv reads CUDA_VISIBLE_DEVICES; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Loopback are the transports a host group offers when there is no
	// NIC; nil means DefaultLoopback, an empty non-nil slice means none.
	Loopback []string
}

type gpuEntry struct {
	ordinal int
	addr    string
	name    string
	dev     *pciDev // nil when sysfs does not show the GPU
	numa    int
}

// Detect reads the machine as spec says and groups GPUs with their nearest
// NICs and cores. A machine without GPUs yields one host group. Errors
// wrap ErrMalformed (a system file it could not parse), ErrInvalidSpec, or
// the error of spec.GPUs or spec.NICs.
func Detect(spec Spec) (*Topology, error) {
	if spec.SysRoot == "" {
		spec.SysRoot = "/sys"
	}
	if spec.ProcRoot == "" {
		spec.ProcRoot = "/proc"
	}
	if spec.LookupEnv == nil {
		spec.LookupEnv = os.LookupEnv
	}
	if spec.Loopback == nil {
		spec.Loopback = DefaultLoopback
	}
	tree, err := scanPCI(spec.SysRoot)
	if err != nil {
		return nil, err
	}
	cpus, err := readCPUs(spec.ProcRoot, spec.SysRoot)
	if err != nil {
		return nil, err
	}
	topo := &Topology{NUMANodes: len(cpus.nodes), PhysicalCores: len(cpus.physical), LogicalCPUs: len(cpus.logical)}
	soleNode := -1
	if ids := cpus.nodeIDs(); len(ids) == 1 {
		soleNode = ids[0]
	}
	resolve := func(n int) int {
		if n < 0 {
			return soleNode
		}
		return n
	}

	gpus, src, err := findGPUs(spec, tree)
	if err != nil {
		return nil, err
	}
	topo.GPUSource = src
	for i := range gpus {
		if gpus[i].dev != nil {
			gpus[i].numa = tree.numaOf(gpus[i].dev)
		}
		gpus[i].numa = resolve(gpus[i].numa)
	}

	var all []NIC
	topo.NICSource = "sysfs"
	if spec.NICs != nil {
		topo.NICSource = "provider"
		if all, err = spec.NICs(); err != nil {
			return nil, fmt.Errorf("topology: list nics: %w", err)
		}
	} else if all, err = sysfsNICs(spec.SysRoot, tree); err != nil {
		return nil, err
	}
	for i := range all {
		completeNIC(&all[i], tree)
		all[i].NUMANode = resolve(all[i].NUMANode)
	}
	kept, virtual, dropped := selectNICs(all)
	topo.Dropped = dropped

	if len(gpus) == 0 {
		topo.GPUSource = "none"
		topo.Groups = []DeviceGroup{hostGroup(spec, topo, kept, virtual, cpus, soleNode)}
		return topo, nil
	}
	topo.Groups = gpuGroups(gpus, kept, tree, topo)
	assignCPUs(topo.Groups, cpus)
	return topo, nil
}

func hostGroup(spec Spec, topo *Topology, kept, virtual []NIC, cpus *cpuLayout, soleNode int) DeviceGroup {
	g := DeviceGroup{Device: Host, NUMANode: soleNode, Affinity: "host"}
	g.NICs = append(append(g.NICs, kept...), virtual...)
	if len(g.NICs) == 0 {
		topo.NICSource = "loopback"
		for _, t := range spec.Loopback {
			g.NICs = append(g.NICs, NIC{Name: "lo", NUMANode: soleNode, Transport: t, Loopback: true})
		}
	} else if g.NICs[0].NUMANode >= 0 {
		g.NUMANode = g.NICs[0].NUMANode
	}
	if cores, ok := cpus.nodes[g.NUMANode]; ok && len(cores) > 0 {
		g.CPUs = append([]int(nil), cores...)
	} else {
		g.CPUs = append([]int(nil), cpus.physical...)
	}
	if g.NICs == nil {
		g.NICs = []NIC{}
	}
	return g
}

// gpuGroups gives each GPU an equal slice of the NICs under its branching
// ancestor, and GPUs whose ancestor has none a slice of the unclaimed NICs
// of their NUMA node.
func gpuGroups(gpus []gpuEntry, nics []NIC, tree *pciTree, topo *Topology) []DeviceGroup {
	groups := make([]DeviceGroup, len(gpus))
	gpusAt := map[string][]int{} // ancestor -> indices into gpus
	for i, g := range gpus {
		groups[i] = DeviceGroup{Device: g.ordinal, PCIAddress: g.addr, GPUName: g.name, NUMANode: g.numa, NICs: []NIC{}}
		if g.dev != nil {
			a := tree.branchingAncestor(g.dev)
			gpusAt[a] = append(gpusAt[a], i)
		}
	}
	nicsAt := map[string][]NIC{}
	var unclaimed []NIC
	for _, n := range nics {
		d := tree.byAddr[n.PCIAddress]
		if d == nil {
			unclaimed = append(unclaimed, n)
			continue
		}
		a := tree.branchingAncestor(d)
		if len(gpusAt[a]) == 0 {
			unclaimed = append(unclaimed, n)
			continue
		}
		nicsAt[a] = append(nicsAt[a], n)
	}
	used := map[string]bool{}
	for a, idx := range gpusAt {
		for j, i := range idx {
			part, shared := slice(nicsAt[a], j, len(idx))
			if len(part) > 0 {
				groups[i].NICs, groups[i].Affinity, groups[i].SharedNICs = part, "pcie", shared
			}
		}
	}
	// NUMA fallback for GPUs whose switch holds no NIC.
	waiting := map[int][]int{}
	for i := range groups {
		if len(groups[i].NICs) == 0 {
			waiting[groups[i].NUMANode] = append(waiting[groups[i].NUMANode], i)
		}
	}
	byNode := map[int][]NIC{}
	for _, n := range unclaimed {
		byNode[n.NUMANode] = append(byNode[n.NUMANode], n)
	}
	for node, idx := range waiting {
		if node < 0 {
			continue
		}
		for j, i := range idx {
			part, shared := slice(byNode[node], j, len(idx))
			if len(part) > 0 {
				groups[i].NICs, groups[i].Affinity, groups[i].SharedNICs = part, "numa", shared
			}
		}
	}
	for _, g := range groups {
		for _, n := range g.NICs {
			used[n.Name+"@"+n.PCIAddress] = true
		}
	}
	for _, n := range nics {
		if !used[n.Name+"@"+n.PCIAddress] {
			topo.Dropped = append(topo.Dropped, Dropped{n, "no visible GPU under its PCIe switch or on its NUMA node"})
		}
	}
	return groups
}

// assignCPUs gives each GPU an equal contiguous slice of its NUMA node's
// physical cores, in ordinal order; GPUs of unknown node share all cores.
func assignCPUs(groups []DeviceGroup, cpus *cpuLayout) {
	onNode := map[int][]int{}
	for i, g := range groups {
		onNode[g.NUMANode] = append(onNode[g.NUMANode], i)
	}
	for node, idx := range onNode {
		pool, ok := cpus.nodes[node]
		if !ok || len(pool) == 0 {
			pool = cpus.physical
		}
		for j, i := range idx {
			part, _ := slice(pool, j, len(idx))
			groups[i].CPUs = append([]int{}, part...)
		}
	}
}

// slice returns the j-th of m equal contiguous parts of items. When m
// exceeds len(items) each part is a single item, shared round-robin.
func slice[T any](items []T, j, m int) ([]T, bool) {
	if len(items) == 0 || m <= 0 {
		return nil, false
	}
	if len(items) < m {
		k := j * len(items) / m
		return items[k : k+1], true
	}
	k := len(items) / m
	return items[j*k : (j+1)*k], false
}

// findGPUs returns the visible GPUs in ordinal order and where they came from.
func findGPUs(spec Spec, tree *pciTree) ([]gpuEntry, string, error) {
	var out []gpuEntry
	if spec.GPUs != nil {
		list, err := spec.GPUs()
		if err != nil {
			return nil, "", fmt.Errorf("topology: list gpus: %w", err)
		}
		for i, g := range list {
			e := gpuEntry{ordinal: i, addr: normalizeAddr(g.PCIAddress), name: g.Name, numa: -1}
			e.dev = tree.byAddr[e.addr]
			if e.name == "" && e.dev != nil {
				e.name = gpuName(e.dev.device)
			}
			out = append(out, e)
		}
		return out, "driver", nil
	}
	phys := tree.gpus()
	order, err := visibleOrder(spec.LookupEnv, len(phys))
	if err != nil {
		return nil, "", err
	}
	for ord, p := range order {
		d := phys[p]
		out = append(out, gpuEntry{ordinal: ord, addr: d.addr, name: gpuName(d.device), dev: d, numa: -1})
	}
	return out, "sysfs", nil
}

// visibleOrder applies CUDA_VISIBLE_DEVICES to n GPUs the way the CUDA
// runtime does: the listed indices in the listed order, stopping at the
// first invalid or repeated one; an empty value hides every GPU.
func visibleOrder(lookup func(string) (string, bool), n int) ([]int, error) {
	v, set := lookup("CUDA_VISIBLE_DEVICES")
	if !set {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	var out []int
	seen := map[int]bool{}
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if strings.HasPrefix(f, "GPU-") || strings.HasPrefix(f, "MIG-") {
			return nil, fmt.Errorf("CUDA_VISIBLE_DEVICES=%q names GPUs by UUID, which only the driver can resolve (set Spec.GPUs): %w", v, ErrInvalidSpec)
		}
		i, err := strconv.Atoi(f)
		if err != nil || i < 0 || i >= n || seen[i] {
			break
		}
		seen[i] = true
		out = append(out, i)
	}
	return out, nil
}

// gpuName names the data-centre GPUs ferry targets when the driver is not
// there to ask.
func gpuName(device uint16) string {
	switch device {
	case 0x2330:
		return "NVIDIA H100 80GB HBM3"
	case 0x2331:
		return "NVIDIA H100 PCIe"
	case 0x2335:
		return "NVIDIA H200"
	case 0x2324:
		return "NVIDIA H800"
	case 0x20b0, 0x20b2:
		return "NVIDIA A100-SXM4"
	case 0x2901:
		return "NVIDIA B200"
	}
	return fmt.Sprintf("NVIDIA GPU [10de:%04x]", device)
}
