package sysreport_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/bench/internal/sysreport"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/topology"
	"github.com/ferryrdma/ferry/fabric/topology/topotest"
)

func noEnv(string) (string, bool) { return "", false }

func cmaOK() error { return nil }

// fakeHost writes the procfs and devfs files sysreport reads next to a
// topotest tree.
func fakeHost(t *testing.T, tr *topotest.Tree, kernel, scope, modules, capEff, driver string, gdr bool) sysreport.Options {
	t.Helper()
	tr.WriteFile("proc/sys/kernel/osrelease", kernel+"\n")
	if scope != "" {
		tr.WriteFile("proc/sys/kernel/yama/ptrace_scope", scope+"\n")
	}
	tr.WriteFile("proc/modules", modules)
	tr.WriteFile("proc/self/status", "Name:\tfabric-debug\nCapEff:\t"+capEff+"\n")
	if driver != "" {
		tr.WriteFile("proc/driver/nvidia/version", driver+"\nGCC version:  gcc version 12.2.0\n")
	}
	if gdr {
		tr.WriteFile("dev/gdrdrv", "")
	}
	require.NoError(t, tr.Err())
	return sysreport.Options{SysRoot: tr.Sys, ProcRoot: tr.Proc, DevRoot: tr.Dev, LookupEnv: noEnv, ProbeCMA: cmaOK}
}

const (
	openDriver = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024"
	propDriver = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023"
	allCaps    = "000001ffffffffff"
	noCaps     = "0000000000000000"
)

func gpusOf(t *testing.T, tr *topotest.Tree, dmabuf bool) func() ([]sysreport.GPU, error) {
	topo, err := topology.Detect(topology.Spec{SysRoot: tr.Sys, ProcRoot: tr.Proc, LookupEnv: noEnv})
	require.NoError(t, err)
	var out []sysreport.GPU
	for _, g := range topo.Groups {
		out = append(out, sysreport.GPU{PCIAddress: "0000" + strings.ToUpper(g.PCIAddress), Name: g.GPUName, DmaBuf: dmabuf})
	}
	return func() ([]sysreport.GPU, error) { return out, nil }
}

func efaDevices(n int, noWrite string) func() ([]sysreport.VerbsDevice, error) {
	return func() ([]sysreport.VerbsDevice, error) {
		var out []sysreport.VerbsDevice
		for i := range n {
			name := fmt.Sprintf("rdmap%ds0", 79+i)
			w := sysreport.Yes
			if name == noWrite {
				w = sysreport.No
			}
			out = append(out, sysreport.VerbsDevice{Name: name, VendorID: 0x1d0f, RDMAWrite: w,
				Ports: []sysreport.VerbsPort{{Number: 1, State: "ACTIVE", LinkSpeed: 100e9, GIDs: []string{"fe80::1"}}}})
		}
		return out, nil
	}
}

func TestFakeP5(t *testing.T) {
	tr, err := topotest.P5(t.TempDir())
	require.NoError(t, err)
	opts := fakeHost(t, tr, "6.8.0-1015-aws", "1", "gdrdrv 16384 0 - Live 0x0\nnvidia_peermem 16384 0 - Live 0x0\nnvidia 1 2 - Live\n", noCaps, openDriver, true)
	opts.GPUs = gpusOf(t, tr, true)
	opts.VerbsDevices = efaDevices(32, "rdmap90s0")
	opts.LibfabricVersion = func() string { return "1.22.0amzn4.0" }
	opts.LibfabricAPI = func() string { return "1.22" }
	opts.Transports = func() ([]string, error) { return []string{"efa", "shm", "tcp", "tcp;ofi_rxm"}, nil }
	opts.Choose = func(tp string) (fabric.Choice, error) {
		assert.Equal(t, "auto", tp)
		return fabric.Choice{Transport: "efa", Domains: make([]fabric.DomainInfo, 32), Reason: "auto: 32 efa device(s) found"}, nil
	}
	r, err := sysreport.Collect(opts)
	require.NoError(t, err)

	assert.Equal(t, "6.8.0-1015-aws", r.Kernel)
	assert.Equal(t, []string{"tcp;ofi_rxm", "tcp", "shm"}, r.Libfabric.Loopback)
	require.NotNil(t, r.Topology)
	assert.Equal(t, "driver", r.Topology.GPUSource)
	require.Len(t, r.Topology.Groups, 8)
	assert.Len(t, r.Topology.Groups[7].NICs, 4)
	assert.Equal(t, sysreport.No, r.Capability("rdma-write").Status)
	assert.Equal(t, sysreport.Yes, r.Capability("dma-buf").Status)
	assert.Contains(t, r.Capability("dma-buf").Detail, "550.54.15 (open kernel module)")
	assert.Equal(t, sysreport.Yes, r.Capability("gdrcopy").Status)
	assert.Equal(t, sysreport.Yes, r.Capability("peer-memory").Status)
	assert.Equal(t, sysreport.No, r.Capability("cma").Status, "ptrace_scope 1 without CAP_SYS_PTRACE")
	assert.Equal(t, 1, r.PtraceScope)
	assert.False(t, r.Auto.Refused)
	assert.Equal(t, "efa", r.Auto.Transport)
	assert.True(t, r.HasWarning("efa-no-rdma-write"))
	assert.True(t, r.HasWarning("cma-off"))
	assert.False(t, r.HasWarning("no-dmabuf"))
	assert.False(t, r.HasWarning("fewer-nics-than-gpus"))

	var buf bytes.Buffer
	require.NoError(t, r.WriteText(&buf))
	out := buf.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"libfabric 1.22.0amzn4.0 (API 1.22 asked for): transports efa, shm, tcp, tcp;ofi_rxm",
		"cuda:0 NVIDIA H100 80GB HBM3 0000:",
		"cpus 0-11",
		"rdmap79s0 (100 Gb/s)", "32 port(s) ACTIVE 100 Gb/s: rdmap79s0/1 .. rdmap110s0/1",
		"auto: efa (32 domain(s))",
		"! efa-no-rdma-write: EFA device rdmap90s0",
	} {
		assert.Contains(t, out, want)
	}
	assert.LessOrEqual(t, strings.Count(out, "\n"), 60, "one screen")
}

func TestFakeDGXProprietaryDriver(t *testing.T) {
	tr, err := topotest.DGXH100(t.TempDir())
	require.NoError(t, err)
	opts := fakeHost(t, tr, "5.15.0-91-generic", "1", "nvidia 1 2 - Live\n", allCaps, propDriver, false)
	tr.WriteFile("sys/module/nv_peer_mem/refcnt", "0\n") // loaded, as sysfs shows it
	opts.GPUs = gpusOf(t, tr, false)
	opts.VerbsDevices = func() ([]sysreport.VerbsDevice, error) {
		return []sysreport.VerbsDevice{{Name: "mlx5_0", VendorID: 0x15b3, Ports: []sysreport.VerbsPort{{Number: 1, State: "DOWN"}}}}, nil
	}
	r, err := sysreport.Collect(opts)
	require.NoError(t, err)
	assert.Equal(t, sysreport.No, r.Capability("dma-buf").Status)
	assert.Equal(t, sysreport.Yes, r.Capability("rdma-write").Status)
	assert.Equal(t, sysreport.No, r.Capability("gdrcopy").Status)
	assert.Equal(t, sysreport.Yes, r.Capability("peer-memory").Status, r.Capability("peer-memory").Detail)
	assert.Equal(t, sysreport.Yes, r.Capability("cma").Status, "CAP_SYS_PTRACE lifts ptrace_scope 1")
	assert.True(t, r.HasWarning("no-dmabuf"))
	assert.True(t, r.HasWarning("port-down"))
	assert.True(t, r.HasWarning("nic-unused"), "the storage NICs")
	assert.True(t, r.HasWarning("auto-refuses"), "no provider linked in this test")
	assert.Contains(t, r.Libfabric.Error, "not linked")
	assert.Contains(t, r.Auto.Hint, "link the efa package")
}

func TestFewerNICsThanGPUs(t *testing.T) {
	tr := topotest.New(t.TempDir())
	tr.CPUs(1, 8, 1)
	tr.Switch(tr.RootComplex(), 0, topotest.H100, topotest.H100, topotest.H100, topotest.ConnectX(0x1021, "400 Gb/sec", "mlx5_0"))
	tr.Switch(tr.RootComplex(), 1, topotest.H100)
	opts := fakeHost(t, tr, "6.1.0-18-amd64", "", "", noCaps, "", false)
	r, err := sysreport.Collect(opts)
	require.NoError(t, err)
	assert.True(t, r.HasWarning("fewer-nics-than-gpus"))
	assert.True(t, r.HasWarning("gpu-without-nic"), "the GPU on node 1")
	assert.Equal(t, sysreport.No, r.Capability("peer-memory").Status)
	assert.True(t, r.HasWarning("no-dmabuf"), "GPUs but no driver")
	assert.Equal(t, sysreport.Yes, r.Capability("cma").Status, "no Yama")
	assert.Equal(t, -1, r.PtraceScope)
	var buf bytes.Buffer
	require.NoError(t, r.WriteText(&buf))
	assert.Contains(t, buf.String(), "nics (shared with other GPUs): mlx5_0")
}

func TestCMAStates(t *testing.T) {
	for _, tc := range []struct {
		scope, caps string
		probe       error
		want        sysreport.Status
	}{
		{"0", noCaps, nil, sysreport.Yes},
		{"1", noCaps, nil, sysreport.No},
		{"2", allCaps, nil, sysreport.Yes},
		{"3", allCaps, nil, sysreport.No},
		{"0", allCaps, unix.ENOSYS, sysreport.No},
	} {
		tr, err := topotest.NoGPUNoNIC(t.TempDir())
		require.NoError(t, err)
		opts := fakeHost(t, tr, "6.1.0", tc.scope, "", tc.caps, "", false)
		opts.ProbeCMA = func() error { return tc.probe }
		r, err := sysreport.Collect(opts)
		require.NoError(t, err)
		assert.Equal(t, tc.want, r.Capability("cma").Status, "%+v: %s", tc, r.Capability("cma").Detail)
		assert.Equal(t, tc.want == sysreport.No, r.HasWarning("cma-off"))
	}
}

func TestIPCCapability(t *testing.T) {
	tr, err := topotest.NoGPUNoNIC(t.TempDir())
	require.NoError(t, err)
	opts := fakeHost(t, tr, "6.1.0", "0", "", noCaps, "", false)
	r, err := sysreport.Collect(opts)
	require.NoError(t, err)
	for _, c := range r.Capabilities {
		assert.NotEqual(t, "ipc", c.Name, "not linked: not reported")
	}
	for probe, want := range map[error]sysreport.Status{nil: sysreport.Yes, unix.ENOSYS: sysreport.No} {
		opts.ProbeIPC = func() error { return probe }
		r, err := sysreport.Collect(opts)
		require.NoError(t, err)
		assert.Equal(t, want, r.Capability("ipc").Status, "probe %v", probe)
	}
}

func TestInputErrorsAreReported(t *testing.T) {
	tr, err := topotest.NoGPUNoNIC(t.TempDir())
	require.NoError(t, err)
	opts := fakeHost(t, tr, "6.1.0", "0", "", noCaps, "", false)
	opts.Transports = func() ([]string, error) { return nil, errors.New("built with CGO_ENABLED=0") }
	opts.VerbsDevices = func() ([]sysreport.VerbsDevice, error) { return nil, errors.New("no RDMA subsystem") }
	opts.GPUs = func() ([]sysreport.GPU, error) { return nil, errors.New("libcuda.so.1 not found") }
	r, err := sysreport.Collect(opts)
	require.NoError(t, err)
	assert.Equal(t, "built with CGO_ENABLED=0", r.Libfabric.Error)
	assert.Equal(t, "no RDMA subsystem", r.VerbsError)
	assert.Equal(t, "libcuda.so.1 not found", r.GPUError)
	require.NotNil(t, r.Topology)
	assert.Empty(t, r.Topology.Groups[0].NICs, "libfabric failed: no loopback transport is claimed")
	var buf bytes.Buffer
	require.NoError(t, r.WriteText(&buf))
	assert.Contains(t, buf.String(), "gpus: libcuda.so.1 not found")

	_, err = sysreport.Collect(sysreport.Options{ProcRoot: filepath.Join(t.TempDir(), "missing")})
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestKernelAtLeast(t *testing.T) {
	for rel, want := range map[string]bool{"5.12.0": true, "5.11.22-x": false, "6.1.0-18-amd64": true, "4.19.0": false, "10.0": true} {
		got, ok := sysreport.KernelAtLeast(rel, 5, 12)
		assert.True(t, ok)
		assert.Equal(t, want, got, rel)
	}
	_, ok := sysreport.KernelAtLeast("", 5, 12)
	assert.False(t, ok)
}

func TestCPUList(t *testing.T) {
	assert.Equal(t, "0-11,24-35,40", sysreport.CPUList(append(append(span(0, 12), span(24, 12)...), 40)))
	assert.Equal(t, "none", sysreport.CPUList(nil))
}

func span(lo, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = lo + i
	}
	return out
}

func TestJSON(t *testing.T) {
	tr, err := topotest.NoGPUNoNIC(t.TempDir())
	require.NoError(t, err)
	r, err := sysreport.Collect(fakeHost(t, tr, "6.1.0", "0", "", noCaps, "", false))
	require.NoError(t, err)
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var back sysreport.Report
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, r, &back)
	assert.Contains(t, string(b), `"auto":{"refused":true`)
	assert.Contains(t, string(b), `"name":"dma-buf","status":"n/a"`)
}
