package topotest

import "fmt"

// PCI ids used by the presets.
var (
	H100    = Endpoint{Vendor: 0x10de, Device: 0x2330, Class: 0x030200}
	H200    = Endpoint{Vendor: 0x10de, Device: 0x2335, Class: 0x030200}
	H100PCI = Endpoint{Vendor: 0x10de, Device: 0x2331, Class: 0x030200}
	// NVSwitch is a bridge-class NVIDIA function that must not count as a GPU.
	NVSwitch = Endpoint{Vendor: 0x10de, Device: 0x22a3, Class: 0x068000}
	NVMe     = Endpoint{Vendor: 0x1d0f, Device: 0xcd01, Class: 0x010802}
	ENA      = Endpoint{Vendor: 0x1d0f, Device: 0xec20, Class: 0x020000}
	VirtIO   = Endpoint{Vendor: 0x1af4, Device: 0x1041, Class: 0x020000}
)

// EFA returns an EFA endpoint named name at rate.
func EFA(device uint16, name, rate string) Endpoint {
	return Endpoint{Vendor: 0x1d0f, Device: device, Class: 0x020000, RDMA: []string{name}, Rate: rate}
}

// ConnectX returns a Mellanox endpoint with one RDMA device per name.
func ConnectX(device uint16, rate string, names ...string) Endpoint {
	return Endpoint{Vendor: 0x15b3, Device: device, Class: 0x020700, RDMA: names, Rate: rate}
}

// awsEFA builds an AWS GPU instance: per GPU one PCIe switch holding the
// GPU, efaPerGPU EFA devices and an NVMe drive; GPUs 0-3 on NUMA node 0,
// 4-7 on node 1; an ENA on node 0 and four NVSwitches on their own root
// complex. 2 sockets x 48 cores x 2 threads.
func awsEFA(root string, gpu Endpoint, efaPerGPU int, efaDevice uint16, rate string) (*Tree, error) {
	t := New(root)
	t.CPUs(2, 48, 2)
	t.Direct(t.RootComplex(), 0, ENA)
	efa := 0
	for g := range 8 {
		eps := []Endpoint{gpu}
		for range efaPerGPU {
			eps = append(eps, EFA(efaDevice, fmt.Sprintf("rdmap%ds0", 79+efa), rate))
			efa++
		}
		eps = append(eps, NVMe)
		t.Switch(t.RootComplex(), g/4, eps...)
	}
	t.Switch(t.RootComplex(), 1, NVSwitch, NVSwitch, NVSwitch, NVSwitch)
	return t, t.Err()
}

// P5 is an AWS p5.48xlarge: 8 H100, 32 EFA at 100 Gb/s (4 per GPU).
func P5(root string) (*Tree, error) { return awsEFA(root, H100, 4, 0xefa1, "100 Gb/sec") }

// P5en is an AWS p5en.48xlarge: 8 H200, 16 EFA at 200 Gb/s (2 per GPU).
func P5en(root string) (*Tree, error) { return awsEFA(root, H200, 2, 0xefa2, "200 Gb/sec") }

// DGXH100 is a DGX H100: four PCIe switches, each with two H100 and two
// ConnectX-7 compute NICs (mlx5_0..7, 400 Gb/s); two storage NICs of
// another model (BlueField-3, mlx5_8 and mlx5_9) sit under switches 0 and
// 2, and four NVSwitches on their own root complex. 2 x 56 cores x 2
// threads; switches 0-1 on node 0, 2-3 on node 1.
func DGXH100(root string) (*Tree, error) {
	t := New(root)
	t.CPUs(2, 56, 2)
	cx := 0
	for s := range 4 {
		eps := []Endpoint{H100, H100,
			ConnectX(0x1021, "400 Gb/sec (4X NDR)", fmt.Sprintf("mlx5_%d", cx)),
			ConnectX(0x1021, "400 Gb/sec (4X NDR)", fmt.Sprintf("mlx5_%d", cx+1))}
		cx += 2
		if s%2 == 0 {
			eps = append(eps, ConnectX(0xa2dc, "200 Gb/sec (4X HDR)", fmt.Sprintf("mlx5_%d", 8+s/2)))
		}
		t.Switch(t.RootComplex(), s/2, eps...)
	}
	t.Switch(t.RootComplex(), 1, NVSwitch, NVSwitch, NVSwitch, NVSwitch)
	return t, t.Err()
}

// TwoSocketSMT is a two-socket workstation-class box with SMT: 2 x 4 cores
// x 2 threads (16 logical CPUs). Each socket's root complex has two PCIe
// H100s and one dual-port ConnectX-6 (mlx5_0/1 on socket 0, mlx5_2/3 on
// socket 1) straight on root ports, no switch. GPU 3 reports numa_node -1
// (its root port says 1), as some firmware does.
func TwoSocketSMT(root string) (*Tree, error) {
	t := New(root)
	t.CPUs(2, 4, 2)
	for s := range 2 {
		rc := t.RootComplex()
		t.Direct(rc, s, H100PCI)
		gpu := H100PCI
		if s == 1 {
			gpu.NUMA = Int(-1)
		}
		t.Direct(rc, s, gpu)
		t.Direct(rc, s, ConnectX(0x101b, "100 Gb/sec (4X EDR)", fmt.Sprintf("mlx5_%d", 2*s), fmt.Sprintf("mlx5_%d", 2*s+1)))
	}
	return t, t.Err()
}

// NoGPUNoNIC is a small virtual machine like the build hosts: one socket,
// two cores without SMT, virtio devices only, no RDMA subsystem.
func NoGPUNoNIC(root string) (*Tree, error) {
	t := New(root)
	t.CPUs(1, 2, 1)
	rc := t.RootComplex()
	t.Direct(rc, -1, VirtIO)
	t.Direct(rc, -1, Endpoint{Vendor: 0x1af4, Device: 0x1042, Class: 0x010000})
	return t, t.Err()
}
