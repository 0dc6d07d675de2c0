package fabric_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/topology"
	"github.com/ferryrdma/ferry/fabric/topology/topotest"
)

// On a fake p5.48xlarge every GPU gets its own 4 EFA NICs and a worker
// pinned to its first core, and the GroupSpecs name the provider's domains.
func TestPlaceGroupsP5(t *testing.T) {
	root, err := topotest.P5(t.TempDir())
	require.NoError(t, err)
	topo, err := topology.Detect(topology.Spec{SysRoot: root.Sys, ProcRoot: root.Proc})
	require.NoError(t, err)
	var doms []fabric.DomainInfo
	for _, g := range topo.Groups {
		for _, n := range g.NICs {
			doms = append(doms, fabric.DomainInfo{Provider: "libfabric", Transport: "efa", Name: n.Name, PCIAddress: n.PCIAddress, LinkSpeed: n.LinkSpeed})
		}
	}
	choice := fabric.Choice{Transport: "efa", Domains: doms}
	specs, err := fabric.PlaceGroups(choice, topo, []int{0, 7}, 4)
	require.NoError(t, err)
	require.Len(t, specs, 2)
	seen := map[string]bool{}
	for i, s := range specs {
		require.True(t, s.Pin)
		require.Len(t, s.Domains, 4)
		g, _ := topo.Group([]int{0, 7}[i])
		require.Equal(t, g.CPUs[0], s.CPU)
		for j, d := range s.Domains {
			require.Equal(t, j, d.Index)
			require.False(t, seen[d.PCIAddress], "a NIC serves one GPU")
			seen[d.PCIAddress] = true
		}
	}
	_, err = fabric.PlaceGroups(choice, topo, []int{0}, 5)
	require.Error(t, err)
}
