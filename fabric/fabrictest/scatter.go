package fabrictest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// testScatter: every routing, with and without a peer group; immediates:
// one per target (ShardPeers, pinned) or one per target per NIC
// (ShardBytes, remainders included).
func testScatter(t *testing.T, p Params) {
	env := NewEnv(t, p)
	imms := Collect(env.B)
	const targets = 5
	mk := func(base uint64, length uint64) []fabric.ScatterTarget {
		ts := make([]fabric.ScatterTarget, targets)
		for i := range ts {
			ts[i] = fabric.ScatterTarget{Dst: env.Desc, Length: length + uint64(i),
				SrcOffset: base + uint64(i)*100000, DstOffset: base + uint64(i)*100000 + 7}
		}
		return ts
	}
	verify := func(ts []fabric.ScatterTarget) {
		for i, tg := range ts {
			require.Equal(t, env.Src.Bytes()[tg.SrcOffset:tg.SrcOffset+tg.Length],
				env.Dst.Bytes()[tg.DstOffset:tg.DstOffset+tg.Length], "target %d", i)
		}
	}
	peers := repeatPeer(env.Desc, targets)
	g, err := env.A.AddPeerGroup(fabric.HostDevice, peers)
	require.NoError(t, err)
	g2, err := env.A.AddPeerGroup(fabric.HostDevice, peers)
	require.NoError(t, err)
	require.Equal(t, g, g2, "identical peer lists share a handle")

	var total int64
	cases := []struct {
		name  string
		route fabric.ScatterRouting
		group fabric.PeerGroup
		per   int
	}{
		{"ShardPeers", fabric.ShardPeers(), fabric.PeerGroup{}, 1},
		{"ShardPeersGroup", fabric.ShardPeers(), g, 1},
		{"ShardBytes", fabric.ShardBytes(), fabric.PeerGroup{}, p.NICs},
		{"ShardBytesGroup", fabric.ShardBytes(), g, p.NICs},
		{"Pinned", fabric.ScatterPinned(p.NICs - 1), fabric.PeerGroup{}, 1},
	}
	for k, tc := range cases {
		ts := mk(uint64(k)*600000, 1001+uint64(k)*33333)
		imm := uint32(3000 + k)
		require.NoError(t, Wait(t, func(c fabric.Completion) error {
			return env.A.SubmitScatter(fabric.ScatterWrite{Src: env.SrcReg, Targets: ts, Imm: fabric.Immediate(imm),
				Route: tc.route, Group: tc.group}, c)
		}), tc.name)
		total += int64(targets * tc.per)
		imms.WaitTotal(t, total)
		require.Equal(t, targets*tc.per, imms.Count(imm), tc.name)
		verify(ts)
	}
	// A tiny target split over every NIC: empty slices still carry immediates.
	ts := []fabric.ScatterTarget{{Dst: env.Desc, Length: 1, SrcOffset: 5, DstOffset: 9}}
	require.NoError(t, Wait(t, func(c fabric.Completion) error {
		return env.A.SubmitScatter(fabric.ScatterWrite{Src: env.SrcReg, Targets: ts, Imm: fabric.Immediate(3100), Route: fabric.ShardBytes()}, c)
	}))
	total += int64(p.NICs)
	imms.WaitTotal(t, total)
	require.Equal(t, env.Src.Bytes()[5], env.Dst.Bytes()[9])
	// A group must match the target count.
	err = env.A.SubmitScatter(fabric.ScatterWrite{Src: env.SrcReg, Targets: ts, Group: g}, fabric.Completion{})
	require.NoError(t, err) // refused asynchronously by the worker
	err = Wait(t, func(c fabric.Completion) error {
		return env.A.SubmitScatter(fabric.ScatterWrite{Src: env.SrcReg, Targets: ts, Group: g}, c)
	})
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)
}

// repeatPeer is a peer list of n entries, each the NIC addresses d lists.
func repeatPeer(d fabric.Descriptor, n int) [][]fabric.Address {
	peers := make([][]fabric.Address, n)
	for i := range peers {
		for _, k := range d.NICs {
			peers[i] = append(peers[i], k.Addr)
		}
	}
	return peers
}
