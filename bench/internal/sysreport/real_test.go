package sysreport_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/bench/internal/sysreport"
	"github.com/ferryrdma/ferry/efa"
)

// TestThisMachine collects the report from the real roots, with the efa
// package linked as fabric-debug links it, and checks every part that can
// be known independently of sysreport. It never skips: on a machine
// without GPUs or NICs that absence is what it asserts.
func TestThisMachine(t *testing.T) {
	r, err := sysreport.Collect(sysreport.Options{LibfabricVersion: efa.Version, LibfabricAPI: efa.APIVersion, Transports: efa.Transports})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, r.WriteText(&buf))
	t.Log("\n" + buf.String())

	var uts unix.Utsname
	require.NoError(t, unix.Uname(&uts))
	assert.Equal(t, unix.ByteSliceToString(uts.Release[:]), r.Kernel)

	ts, tErr := efa.Transports()
	if tErr != nil {
		assert.Equal(t, tErr.Error(), r.Libfabric.Error)
	} else {
		assert.Equal(t, ts, r.Libfabric.Transports)
		assert.Equal(t, efa.Version(), r.Libfabric.Version)
		assert.Equal(t, efa.APIVersion(), r.Libfabric.API)
		for _, lb := range []string{"tcp;ofi_rxm", "shm"} {
			assert.Equal(t, slices.Contains(ts, lb), slices.Contains(r.Libfabric.Loopback, lb), lb)
		}
	}

	nvidia := 0
	vendors, _ := filepath.Glob("/sys/bus/pci/devices/*/vendor")
	for _, v := range vendors {
		b, _ := os.ReadFile(v)
		cls, _ := os.ReadFile(filepath.Join(filepath.Dir(v), "class"))
		if strings.TrimSpace(string(b)) == "0x10de" && (strings.HasPrefix(string(cls), "0x0302") || strings.HasPrefix(string(cls), "0x0300")) {
			nvidia++
		}
	}
	_, ibErr := os.Stat("/sys/class/infiniband")
	noNIC := os.IsNotExist(ibErr)
	require.NotNil(t, r.Topology, r.TopologyError)
	if _, set := os.LookupEnv("CUDA_VISIBLE_DEVICES"); !set {
		assert.Equal(t, nvidia, r.Topology.GPUCount())
	}
	if nvidia == 0 {
		require.Len(t, r.Topology.Groups, 1)
		host := r.Topology.Groups[0]
		assert.True(t, host.IsHost())
		assert.NotEmpty(t, host.CPUs)
		if noNIC && tErr == nil {
			var got []string
			for _, n := range host.NICs {
				assert.True(t, n.Loopback)
				got = append(got, n.Transport)
			}
			var want []string
			for _, lb := range []string{"tcp;ofi_rxm", "shm"} {
				if slices.Contains(ts, lb) {
					want = append(want, lb)
				}
			}
			assert.Equal(t, want, got, "the host group offers the loopback transports libfabric has")
		}
		assert.False(t, r.HasWarning("no-dmabuf"), "no GPU, nothing to register")
	}
	if noNIC {
		assert.True(t, r.Auto.Refused, "no RDMA device: auto must refuse, never fall back to TCP")
		assert.True(t, r.HasWarning("auto-refuses"))
		if slices.Contains(r.Libfabric.Loopback, "tcp;ofi_rxm") {
			assert.Contains(t, r.Auto.Hint, `--transport "tcp;ofi_rxm"`)
		}
		assert.Contains(t, buf.String(), "auto: refuses")
		assert.NotEqual(t, sysreport.Yes, r.Capability("rdma-write").Status)
	}

	dmabuf := r.Capability("dma-buf")
	if ok, parsed := sysreport.KernelAtLeast(r.Kernel, 5, 12); parsed && !ok {
		assert.Equal(t, sysreport.No, dmabuf.Status)
	} else if _, err := os.Stat("/proc/driver/nvidia/version"); os.IsNotExist(err) && nvidia == 0 {
		assert.Equal(t, sysreport.NotApplicable, dmabuf.Status)
	}
	_, err = os.Stat("/dev/gdrdrv")
	assert.Equal(t, err == nil, r.Capability("gdrcopy").Status == sysreport.Yes)
	mods, _ := os.ReadFile("/proc/modules")
	_, sysErr := os.Stat("/sys/module/nvidia_peermem")
	assert.Equal(t, strings.Contains(string(mods), "nvidia_peermem ") || sysErr == nil, r.Capability("peer-memory").Status == sysreport.Yes)

	scope, scopeErr := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if os.IsNotExist(scopeErr) {
		assert.Equal(t, -1, r.PtraceScope)
	} else {
		assert.Equal(t, strings.TrimSpace(string(scope)), strings.TrimSpace(strings.Fields(buf.String()[strings.Index(buf.String(), "(ptrace_scope")+1:])[1]))
	}
	if r.PtraceScope <= 0 {
		assert.Equal(t, sysreport.Yes, r.Capability("cma").Status, "no ptrace restriction: process_vm_readv on ourselves must work")
	}
}
