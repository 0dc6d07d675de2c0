package topology

import (
	"fmt"
	"strconv"
)

// Host is the Device value of a host group: host memory, no GPU.
const Host = -1

// PCI vendor ids the detection recognises.
const (
	VendorNVIDIA   = 0x10de
	VendorAmazon   = 0x1d0f // EFA
	VendorMellanox = 0x15b3 // ConnectX, BlueField
)

// GPU is one visible GPU, as the CUDA driver reports it.
type GPU struct {
	// PCIAddress is the bus id, any case, with a 4 or 8 digit domain
	// ("00000000:18:00.0" as CUDA prints it is accepted).
	PCIAddress string `json:"pci_address"`
	// Name is the marketing name ("NVIDIA H100 80GB HBM3"); may be empty.
	Name string `json:"name,omitempty"`
}

// NIC is one RDMA NIC (or, for a host group on a machine without one, a
// loopback transport the efa provider can open).
type NIC struct {
	Name       string `json:"name"`                  // "rdmap16s27", "mlx5_0", "lo"
	PCIAddress string `json:"pci_address,omitempty"` // empty for loopback
	LinkSpeed  uint64 `json:"link_speed_bps"`        // bits per second, 0 if unknown
	NUMANode   int    `json:"numa_node"`             // -1 if unknown
	VendorID   uint16 `json:"vendor_id,omitempty"`
	DeviceID   uint16 `json:"device_id,omitempty"`
	// Transport is the transport that serves it: "efa", "verbs", or for
	// loopback entries the libfabric transport ("tcp;ofi_rxm", "shm").
	Transport string `json:"transport"`
	Loopback  bool   `json:"loopback,omitempty"`
}

// DeviceGroup is one GPU (or the host) with its nearest NICs and CPU cores:
// what a fabric.GroupSpec, one engine worker, is placed from.
type DeviceGroup struct {
	// Device is the CUDA ordinal, or Host.
	Device     int    `json:"device"`
	PCIAddress string `json:"pci_address,omitempty"`
	GPUName    string `json:"gpu_name,omitempty"`
	NUMANode   int    `json:"numa_node"` // -1 if unknown
	NICs       []NIC  `json:"nics"`
	// CPUs are physical cores (one logical CPU per core), NUMA-local when
	// the node is known. CPUs[0] is where the group's worker runs.
	CPUs []int `json:"cpus"`
	// Affinity says how the NICs were chosen: "pcie" (same PCIe switch or
	// root complex), "numa" (same NUMA node, no NIC under the GPU's
	// switch), "host" (host group), or "" when the group has no NIC.
	Affinity string `json:"affinity"`
	// SharedNICs is set when the GPUs of a switch outnumber its NICs and
	// several groups use the same NIC.
	SharedNICs bool `json:"shared_nics,omitempty"`
}

// IsHost reports whether g is a host group.
func (g DeviceGroup) IsHost() bool { return g.Device == Host }

// DeviceName returns "host" or "cuda:N", the form fabric.ParseDevice reads.
func (g DeviceGroup) DeviceName() string {
	if g.IsHost() {
		return "host"
	}
	return "cuda:" + strconv.Itoa(g.Device)
}

// Nearest returns the group's first n NICs, the nearest ones; n <= 0 means
// all of them. It fails with ErrTooFewNICs when the group has fewer.
func (g DeviceGroup) Nearest(n int) ([]NIC, error) {
	if n <= 0 {
		n = len(g.NICs)
	}
	if n == 0 || n > len(g.NICs) {
		return nil, fmt.Errorf("%s has %d nic(s), %d wanted: %w", g.DeviceName(), len(g.NICs), n, ErrTooFewNICs)
	}
	return append([]NIC(nil), g.NICs[:n]...), nil
}

// WorkerCPU returns the core a worker for this group is pinned to: the
// first of its CPUs. It fails with ErrTooFewCPUs when the group has none.
func (g DeviceGroup) WorkerCPU() (int, error) {
	if len(g.CPUs) == 0 {
		return -1, fmt.Errorf("%s has no cpu: %w", g.DeviceName(), ErrTooFewCPUs)
	}
	return g.CPUs[0], nil
}

// Dropped is a NIC left out of every group, and why.
type Dropped struct {
	NIC    NIC    `json:"nic"`
	Reason string `json:"reason"`
}

// Topology is the result of Detect. It is plain data, safe for concurrent
// reads; its methods do not modify it.
type Topology struct {
	// Groups are the GPU groups in CUDA ordinal order, or one host group.
	Groups []DeviceGroup `json:"groups"`
	// GPUSource says where GPU identity came from: "driver" (Spec.GPUs),
	// "sysfs", or "none".
	GPUSource string `json:"gpu_source"`
	// NICSource says where NICs came from: "provider" (Spec.NICs),
	// "sysfs", or "loopback".
	NICSource string `json:"nic_source"`
	// Dropped are NICs found but not used.
	Dropped []Dropped `json:"dropped,omitempty"`
	// NUMANodes, PhysicalCores and LogicalCPUs describe the machine.
	NUMANodes     int `json:"numa_nodes"`
	PhysicalCores int `json:"physical_cores"`
	LogicalCPUs   int `json:"logical_cpus"`
}

// Group returns the device group of a CUDA ordinal, or of Host. It fails with
// ErrNoDevice when there is none.
func (t *Topology) Group(device int) (DeviceGroup, error) {
	for _, g := range t.Groups {
		if g.Device == device {
			return g, nil
		}
	}
	name := DeviceGroup{Device: device}.DeviceName()
	return DeviceGroup{}, fmt.Errorf("%s (have %d group(s)): %w", name, len(t.Groups), ErrNoDevice)
}

// GPUCount returns the number of GPU groups.
func (t *Topology) GPUCount() int {
	n := 0
	for _, g := range t.Groups {
		if !g.IsHost() {
			n++
		}
	}
	return n
}

// Placement is what an engine needs to build one worker: a device, the NICs
// it opens and the core its worker is pinned to.
type Placement struct {
	Device    int
	NICs      []NIC
	WorkerCPU int
	// CPUs are all the cores of the group; CPUs[0] == WorkerCPU.
	CPUs []int
}

// Place returns device with its nearest nics NICs (all of them when nics
// <= 0) and its worker core. Errors wrap ErrNoDevice, ErrTooFewNICs or
// ErrTooFewCPUs.
func (t *Topology) Place(device, nics int) (Placement, error) {
	g, err := t.Group(device)
	if err != nil {
		return Placement{}, err
	}
	ns, err := g.Nearest(nics)
	if err != nil {
		return Placement{}, err
	}
	cpu, err := g.WorkerCPU()
	if err != nil {
		return Placement{}, err
	}
	return Placement{Device: device, NICs: ns, WorkerCPU: cpu, CPUs: append([]int(nil), g.CPUs...)}, nil
}
