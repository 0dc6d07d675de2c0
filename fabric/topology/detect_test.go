package topology_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric/topology"
	"github.com/ferryrdma/ferry/fabric/topology/topotest"
)

// noEnv hides the real CUDA_VISIBLE_DEVICES from fake-tree tests.
func noEnv(string) (string, bool) { return "", false }

func env(v string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if k == "CUDA_VISIBLE_DEVICES" {
			return v, true
		}
		return "", false
	}
}

func spec(tr *topotest.Tree) topology.Spec {
	return topology.Spec{SysRoot: tr.Sys, ProcRoot: tr.Proc, LookupEnv: noEnv}
}

func build(t *testing.T, preset func(string) (*topotest.Tree, error)) *topotest.Tree {
	t.Helper()
	tr, err := preset(t.TempDir())
	require.NoError(t, err)
	return tr
}

func detect(t *testing.T, s topology.Spec) *topology.Topology {
	t.Helper()
	topo, err := topology.Detect(s)
	require.NoError(t, err)
	return topo
}

func names(ns []topology.NIC) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}

func span(lo, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = lo + i
	}
	return out
}

func TestAWSP5(t *testing.T) {
	topo := detect(t, spec(build(t, topotest.P5)))
	require.Len(t, topo.Groups, 8)
	assert.Equal(t, "sysfs", topo.GPUSource)
	assert.Equal(t, 2, topo.NUMANodes)
	assert.Equal(t, 96, topo.PhysicalCores)
	assert.Equal(t, 192, topo.LogicalCPUs)
	assert.Empty(t, topo.Dropped)
	for i, g := range topo.Groups {
		assert.Equal(t, i, g.Device)
		assert.Equal(t, "NVIDIA H100 80GB HBM3", g.GPUName)
		assert.Equal(t, i/4, g.NUMANode, "gpu %d", i)
		var want []string
		for k := range 4 {
			want = append(want, fmt.Sprintf("rdmap%ds0", 79+4*i+k))
		}
		assert.Equal(t, want, names(g.NICs), "gpu %d", i)
		for _, n := range g.NICs {
			assert.Equal(t, uint64(100e9), n.LinkSpeed)
			assert.Equal(t, "efa", n.Transport)
			assert.Equal(t, i/4, n.NUMANode)
		}
		assert.Equal(t, "pcie", g.Affinity)
		assert.Equal(t, span(12*i, 12), g.CPUs, "gpu %d: 48 physical cores per node, 4 GPUs per node", i)
	}
	p, err := topo.Place(3, 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"rdmap91s0", "rdmap92s0"}, names(p.NICs))
	assert.Equal(t, 36, p.WorkerCPU)
}

func TestAWSP5en(t *testing.T) {
	topo := detect(t, spec(build(t, topotest.P5en)))
	require.Len(t, topo.Groups, 8)
	for i, g := range topo.Groups {
		assert.Equal(t, "NVIDIA H200", g.GPUName)
		assert.Equal(t, []string{fmt.Sprintf("rdmap%ds0", 79+2*i), fmt.Sprintf("rdmap%ds0", 80+2*i)}, names(g.NICs))
		for _, n := range g.NICs {
			assert.Equal(t, uint64(200e9), n.LinkSpeed)
		}
		assert.Len(t, g.CPUs, 12)
	}
}

func TestDGXH100StorageNICsLeftOut(t *testing.T) {
	topo := detect(t, spec(build(t, topotest.DGXH100)))
	require.Len(t, topo.Groups, 8, "NVSwitches are not GPUs")
	for i, g := range topo.Groups {
		assert.Equal(t, []string{fmt.Sprintf("mlx5_%d", i)}, names(g.NICs), "gpu %d", i)
		assert.Equal(t, uint64(400e9), g.NICs[0].LinkSpeed)
		assert.Equal(t, "verbs", g.NICs[0].Transport)
		assert.Equal(t, i/4, g.NUMANode)
		assert.Equal(t, span(14*i, 14), g.CPUs, "gpu %d: 56 cores per node, 4 GPUs per node", i)
	}
	require.Len(t, topo.Dropped, 2)
	for _, d := range topo.Dropped {
		assert.Contains(t, []string{"mlx5_8", "mlx5_9"}, d.NIC.Name)
		assert.Contains(t, d.Reason, "15b3:a2dc differs from the compute nics' 15b3:1021")
	}
}

func TestTwoSocketSMT(t *testing.T) {
	topo := detect(t, spec(build(t, topotest.TwoSocketSMT)))
	require.Len(t, topo.Groups, 4)
	assert.Equal(t, 8, topo.PhysicalCores)
	assert.Equal(t, 16, topo.LogicalCPUs)
	wantCPUs := [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}} // SMT siblings 8-15 removed
	for i, g := range topo.Groups {
		assert.Equal(t, []string{fmt.Sprintf("mlx5_%d", i)}, names(g.NICs), "dual-port NIC: one port per GPU")
		assert.Equal(t, i/2, g.NUMANode, "gpu %d (gpu 3 reports -1, its root port 1)", i)
		assert.Equal(t, wantCPUs[i], g.CPUs)
		assert.Equal(t, uint64(100e9), g.NICs[0].LinkSpeed)
	}
}

func TestNoGPUNoNIC(t *testing.T) {
	topo := detect(t, spec(build(t, topotest.NoGPUNoNIC)))
	require.Len(t, topo.Groups, 1)
	g := topo.Groups[0]
	assert.True(t, g.IsHost())
	assert.Equal(t, "host", g.DeviceName())
	assert.Equal(t, 0, g.NUMANode)
	assert.Equal(t, []int{0, 1}, g.CPUs)
	assert.Equal(t, "none", topo.GPUSource)
	assert.Equal(t, "loopback", topo.NICSource)
	require.Len(t, g.NICs, 2)
	assert.Equal(t, "tcp;ofi_rxm", g.NICs[0].Transport)
	assert.Equal(t, "shm", g.NICs[1].Transport)
	assert.True(t, g.NICs[0].Loopback)
	_, err := topo.Group(0)
	assert.ErrorIs(t, err, topology.ErrNoDevice)

	s := spec(build(t, topotest.NoGPUNoNIC))
	s.Loopback = []string{}
	topo = detect(t, s)
	_, err = topo.Groups[0].Nearest(1)
	assert.ErrorIs(t, err, topology.ErrTooFewNICs)
}

func TestCUDAVisibleDevices(t *testing.T) {
	tr := build(t, topotest.P5)
	for _, tc := range []struct {
		env  string
		phys []int // physical GPU (by PCI order) of each visible ordinal
	}{
		{"6,2", []int{6, 2}},
		{"1,9,2", []int{1}}, // the runtime stops at the first invalid index
		{"3,3,4", []int{3}}, // and at a repeated one
		{"0, 1", []int{0, 1}},
		{"-1", nil},
	} {
		s := spec(tr)
		s.LookupEnv = env(tc.env)
		topo := detect(t, s)
		if tc.phys == nil {
			require.Len(t, topo.Groups, 1, tc.env)
			assert.True(t, topo.Groups[0].IsHost())
			assert.Len(t, topo.Groups[0].NICs, 32, "a host group keeps every EFA")
			continue
		}
		require.Len(t, topo.Groups, len(tc.phys), tc.env)
		for ord, p := range tc.phys {
			g := topo.Groups[ord]
			assert.Equal(t, ord, g.Device)
			assert.Equal(t, fmt.Sprintf("rdmap%ds0", 79+4*p), g.NICs[0].Name, "env %q ordinal %d", tc.env, ord)
		}
	}
	// Alone on its node, a GPU gets all of the node's cores.
	s := spec(tr)
	s.LookupEnv = env("6,2")
	topo := detect(t, s)
	assert.Equal(t, span(48, 48), topo.Groups[0].CPUs)
	assert.Equal(t, span(0, 48), topo.Groups[1].CPUs)

	s.LookupEnv = env("GPU-8f5a1c2e-0000")
	_, err := topology.Detect(s)
	assert.ErrorIs(t, err, topology.ErrInvalidSpec)
}

func TestInjectedGPUsAndNICs(t *testing.T) {
	tr := build(t, topotest.P5)
	base := detect(t, spec(tr))
	s := spec(tr)
	s.LookupEnv = env("0") // ignored: the driver already applied it
	s.GPUs = func() ([]topology.GPU, error) {
		// The driver's order and spelling: 8-digit domain, upper case.
		return []topology.GPU{
			{PCIAddress: "0000" + strings.ToUpper(base.Groups[5].PCIAddress), Name: "NVIDIA H100 80GB HBM3"},
			{PCIAddress: base.Groups[1].PCIAddress},
		}, nil
	}
	s.NICs = func() ([]topology.NIC, error) {
		// A provider that sees only the first two EFA of each GPU.
		var out []topology.NIC
		for _, g := range base.Groups {
			for _, n := range g.NICs[:2] {
				out = append(out, topology.NIC{Name: n.Name, PCIAddress: n.PCIAddress, LinkSpeed: n.LinkSpeed})
			}
		}
		return out, nil
	}
	topo := detect(t, s)
	assert.Equal(t, "driver", topo.GPUSource)
	assert.Equal(t, "provider", topo.NICSource)
	require.Len(t, topo.Groups, 2)
	assert.Equal(t, base.Groups[5].PCIAddress, topo.Groups[0].PCIAddress)
	assert.Equal(t, names(base.Groups[5].NICs[:2]), names(topo.Groups[0].NICs))
	assert.Equal(t, names(base.Groups[1].NICs[:2]), names(topo.Groups[1].NICs))
	assert.Equal(t, "NVIDIA H100 80GB HBM3", topo.Groups[1].GPUName, "name filled from the PCI id")
	assert.Equal(t, "efa", topo.Groups[0].NICs[0].Transport)
	assert.Len(t, topo.Dropped, 12, "NICs of GPUs that are not visible")

	s.GPUs = func() ([]topology.GPU, error) { return nil, os.ErrPermission }
	_, err := topology.Detect(s)
	assert.ErrorIs(t, err, os.ErrPermission)
}

func TestNUMAFallbackAndSharing(t *testing.T) {
	tr := topotest.New(t.TempDir())
	tr.CPUs(1, 8, 1)
	gpuOnly := tr.Switch(tr.RootComplex(), 0, topotest.H100, topotest.NVMe)
	shared := tr.Switch(tr.RootComplex(), 0, topotest.H100, topotest.H100,
		topotest.ConnectX(0x1021, "400 Gb/sec (4X NDR)", "mlx5_0"))
	tr.Direct(tr.RootComplex(), 0, topotest.ConnectX(0x1021, "400 Gb/sec (4X NDR)", "mlx5_1"))
	require.NoError(t, tr.Err())
	topo := detect(t, spec(tr))
	require.Len(t, topo.Groups, 3)
	assert.Equal(t, gpuOnly[0], topo.Groups[0].PCIAddress)
	assert.Equal(t, []string{"mlx5_1"}, names(topo.Groups[0].NICs))
	assert.Equal(t, "numa", topo.Groups[0].Affinity)
	for _, i := range []int{1, 2} {
		assert.Equal(t, shared[i-1], topo.Groups[i].PCIAddress)
		assert.Equal(t, []string{"mlx5_0"}, names(topo.Groups[i].NICs))
		assert.True(t, topo.Groups[i].SharedNICs)
		assert.Equal(t, "pcie", topo.Groups[i].Affinity)
	}
	assert.Equal(t, [][]int{{0, 1}, {2, 3}, {4, 5}}, [][]int{topo.Groups[0].CPUs, topo.Groups[1].CPUs, topo.Groups[2].CPUs})
}

func TestEFAPreferredOverVerbs(t *testing.T) {
	tr := topotest.New(t.TempDir())
	tr.CPUs(1, 4, 2)
	tr.Switch(tr.RootComplex(), 0, topotest.H100, topotest.EFA(0xefa1, "rdmap0", "100 Gb/sec"),
		topotest.ConnectX(0x1021, "400 Gb/sec", "mlx5_0"), topotest.ConnectX(0x1021, "400 Gb/sec", "mlx5_1"))
	require.NoError(t, tr.Err())
	topo := detect(t, spec(tr))
	assert.Equal(t, []string{"rdmap0"}, names(topo.Groups[0].NICs))
	require.Len(t, topo.Dropped, 2)
	assert.Contains(t, topo.Dropped[0].Reason, "EFA devices are present")
}

func TestNUMAMinusOneOnSingleNode(t *testing.T) {
	// Cloud VMs often report -1 everywhere: one node means node 0.
	tr := topotest.New(t.TempDir())
	tr.CPUs(1, 4, 1)
	tr.Switch(tr.RootComplex(), -1, topotest.H100, topotest.EFA(0xefa1, "rdmap0", "100 Gb/sec"))
	require.NoError(t, tr.Err())
	topo := detect(t, spec(tr))
	require.Len(t, topo.Groups, 1)
	assert.Equal(t, 0, topo.Groups[0].NUMANode)
	assert.Equal(t, 0, topo.Groups[0].NICs[0].NUMANode)
	assert.Equal(t, []string{"rdmap0"}, names(topo.Groups[0].NICs))
	assert.Equal(t, []int{0, 1, 2, 3}, topo.Groups[0].CPUs)
}

func TestMalformedFiles(t *testing.T) {
	tr := build(t, topotest.TwoSocketSMT)
	require.NoError(t, os.WriteFile(filepath.Join(tr.Sys, "bus", "pci", "devices", "0000:11:00.0", "vendor"), []byte("nvidia\n"), 0o644))
	_, err := topology.Detect(spec(tr))
	assert.ErrorIs(t, err, topology.ErrMalformed)
	var fe *topology.FileError
	require.ErrorAs(t, err, &fe)
	assert.Contains(t, fe.Path, "vendor")

	tr = build(t, topotest.NoGPUNoNIC)
	require.NoError(t, os.WriteFile(filepath.Join(tr.Proc, "cpuinfo"), []byte("processor : x\n"), 0o644))
	_, err = topology.Detect(spec(tr))
	assert.ErrorIs(t, err, topology.ErrMalformed)

	tr = build(t, topotest.NoGPUNoNIC)
	require.NoError(t, os.WriteFile(filepath.Join(tr.Sys, "devices", "system", "node", "node0", "cpulist"), []byte("3-1\n"), 0o644))
	_, err = topology.Detect(spec(tr))
	assert.ErrorIs(t, err, topology.ErrMalformed)

	_, err = topology.Detect(topology.Spec{SysRoot: t.TempDir(), ProcRoot: t.TempDir()})
	assert.ErrorIs(t, err, os.ErrNotExist, "no /proc/cpuinfo")
}

func TestPlaceErrors(t *testing.T) {
	topo := detect(t, spec(build(t, topotest.DGXH100)))
	_, err := topo.Place(8, 1)
	assert.ErrorIs(t, err, topology.ErrNoDevice)
	_, err = topo.Place(0, 2)
	assert.ErrorIs(t, err, topology.ErrTooFewNICs)
	p, err := topo.Place(7, 0)
	require.NoError(t, err)
	assert.Equal(t, 98, p.WorkerCPU)
	assert.Equal(t, []string{"mlx5_7"}, names(p.NICs))
	_, err = topology.DeviceGroup{Device: 1}.WorkerCPU()
	assert.ErrorIs(t, err, topology.ErrTooFewCPUs)
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]uint64{
		"100 Gb/sec (4X EDR)": 100e9, "2.5 Gb/sec (1X SDR)": 2.5e9, "400 Gb/sec": 400e9,
		"10 Mb/sec": 10e6, "": 0, "fast": 0, "-1 Gb/sec": 0, "12 furlongs": 0,
	} {
		assert.Equal(t, want, topology.ParseRate(in), in)
	}
}

// TestThisMachine runs Detect on the real /sys and /proc and checks what
// can be known independently of it.
func TestThisMachine(t *testing.T) {
	topo, err := topology.Detect(topology.Spec{})
	require.NoError(t, err)
	require.NotEmpty(t, topo.Groups)
	nvidia := 0
	vendors, _ := filepath.Glob("/sys/bus/pci/devices/*/vendor")
	for _, v := range vendors {
		b, _ := os.ReadFile(v)
		cls, _ := os.ReadFile(filepath.Join(filepath.Dir(v), "class"))
		if strings.TrimSpace(string(b)) == "0x10de" && (strings.HasPrefix(string(cls), "0x0302") || strings.HasPrefix(string(cls), "0x0300")) {
			nvidia++
		}
	}
	if _, set := os.LookupEnv("CUDA_VISIBLE_DEVICES"); nvidia == 0 || set {
		if nvidia == 0 {
			require.Len(t, topo.Groups, 1, "no NVIDIA GPU in sysfs: one host group")
			assert.True(t, topo.Groups[0].IsHost())
		}
	} else {
		assert.Equal(t, nvidia, topo.GPUCount())
	}
	for _, g := range topo.Groups {
		assert.NotEmpty(t, g.CPUs, g.DeviceName())
		assert.LessOrEqual(t, len(g.CPUs), topo.PhysicalCores)
	}
	assert.LessOrEqual(t, topo.PhysicalCores, topo.LogicalCPUs)
	if _, err := os.Stat("/sys/class/infiniband"); os.IsNotExist(err) && nvidia == 0 {
		assert.Equal(t, "loopback", topo.NICSource)
		assert.Equal(t, []string{"tcp;ofi_rxm", "shm"}, []string{topo.Groups[0].NICs[0].Transport, topo.Groups[0].NICs[1].Transport})
	}
}
