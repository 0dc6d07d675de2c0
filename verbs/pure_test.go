package verbs

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/ibv"
)

func gidOf(s string) [16]byte {
	var g [16]byte
	copy(g[:], net.ParseIP(s).To16())
	return g
}

func TestChooseGID(t *testing.T) {
	// The table rxe builds on a netdev with 10.99.0.1 and a link-local IPv6.
	rxe := []ibv.GIDEntry{
		{Index: 0, GID: gidOf("fe80::e848:5fff:fe97:5bd0"), Type: ibv.GIDTypeRoCEv2},
		{Index: 1, GID: gidOf("10.99.0.1"), Type: ibv.GIDTypeRoCEv2},
	}
	g, err := chooseGID(ibv.LinkEthernet, rxe, "")
	require.NoError(t, err)
	require.Equal(t, 1, g.Index, "not the link-local index 0")

	// mlx5 on RoCE lists v1 and v2 pairs; v2 with IPv4 wins.
	mlx := []ibv.GIDEntry{
		{Index: 0, GID: gidOf("fe80::1"), Type: ibv.GIDTypeRoCEv1},
		{Index: 1, GID: gidOf("fe80::1"), Type: ibv.GIDTypeRoCEv2},
		{Index: 2, GID: gidOf("192.168.1.5"), Type: ibv.GIDTypeRoCEv1},
		{Index: 3, GID: gidOf("192.168.1.5"), Type: ibv.GIDTypeRoCEv2},
		{Index: 4, GID: gidOf("2001:db8::5"), Type: ibv.GIDTypeRoCEv2},
	}
	g, err = chooseGID(ibv.LinkEthernet, mlx, "")
	require.NoError(t, err)
	require.Equal(t, 3, g.Index)
	g, err = chooseGID(ibv.LinkEthernet, mlx[:2], "")
	require.NoError(t, err)
	require.Equal(t, 1, g.Index, "v2 link-local over v1")
	g, err = chooseGID(ibv.LinkEthernet, append(mlx[:2:2], mlx[4]), "")
	require.NoError(t, err)
	require.Equal(t, 4, g.Index, "routable IPv6 over link-local")

	// Node pins the address.
	g, err = chooseGID(ibv.LinkEthernet, mlx, "2001:db8::5")
	require.NoError(t, err)
	require.Equal(t, 4, g.Index)
	g, err = chooseGID(ibv.LinkEthernet, mlx, "192.168.1.5")
	require.NoError(t, err)
	require.Equal(t, 3, g.Index)
	_, err = chooseGID(ibv.LinkEthernet, mlx, "10.0.0.9")
	require.ErrorIs(t, err, rdma.ErrInvalidArgument)

	// InfiniBand: index 0.
	ib := []ibv.GIDEntry{{Index: 0, GID: gidOf("fe80::2"), Type: ibv.GIDTypeIB}, {Index: 1, GID: gidOf("fe80::3")}}
	g, err = chooseGID(ibv.LinkInfiniBand, ib, "")
	require.NoError(t, err)
	require.Equal(t, 0, g.Index)

	_, err = chooseGID(ibv.LinkEthernet, nil, "")
	require.ErrorIs(t, err, rdma.ErrNotSupported)
}

func TestQPAttrBuilders(t *testing.T) {
	init := rcInitAttr(2)
	require.Equal(t, ibv.QPSInit, init.State)
	require.Equal(t, uint8(2), init.Port)
	require.Equal(t, ibv.AccessLocalWrite|ibv.AccessRemoteWrite|ibv.AccessRemoteRead, init.Access)
	require.Equal(t, ibv.AttrState|ibv.AttrPKeyIndex|ibv.AttrPort|ibv.AttrAccessFlags, init.Mask)

	roce := udAddr{Link: ibv.LinkEthernet, GID: gidOf("10.0.0.2"), QPN: 9}
	p := pathInfo{port: 1, mtu: ibv.MTU4096, global: true, sgidIndex: 3}
	rtr := rcRTRAttr(p, roce, ibv.MTU1024, 77, 0x1abcdef)
	require.Equal(t, ibv.QPSRTR, rtr.State)
	require.Equal(t, ibv.MTU1024, rtr.PathMTU, "the smaller MTU")
	require.Equal(t, uint32(77), rtr.DestQPN)
	require.Equal(t, uint32(0xabcdef), rtr.RQPSN, "PSNs are 24 bits")
	require.True(t, rtr.IsGlobal, "RoCE needs a GRH")
	require.Equal(t, uint8(3), rtr.SGIDIndex)
	require.Equal(t, roce.GID, rtr.DGID)
	require.NotZero(t, rtr.HopLimit)
	require.Equal(t, uint8(1), rtr.MaxDestRdAtomic)
	for _, bit := range []uint32{ibv.AttrAV, ibv.AttrPathMTU, ibv.AttrDestQPN, ibv.AttrRQPSN, ibv.AttrMaxDestRdAtomic, ibv.AttrMinRNRTimer} {
		require.NotZero(t, rtr.Mask&bit)
	}
	require.Equal(t, ibv.MTU4096, rcRTRAttr(p, roce, ibv.MTU4096, 1, 1).PathMTU)
	require.Equal(t, ibv.MTU4096, rcRTRAttr(p, roce, 0, 1, 1).PathMTU, "unknown remote MTU")

	ib := udAddr{Link: ibv.LinkInfiniBand, GID: gidOf("fe80::9"), QPN: 9, LID: 0x11}
	rtr = rcRTRAttr(pathInfo{port: 1, mtu: ibv.MTU2048}, ib, ibv.MTU4096, 5, 6)
	require.False(t, rtr.IsGlobal, "same-subnet IB uses the LID")
	require.Equal(t, uint16(0x11), rtr.DLID)

	rts := rcRTSAttr(0xff123456)
	require.Equal(t, ibv.QPSRTS, rts.State)
	require.Equal(t, uint32(0x123456), rts.SQPSN)
	require.Equal(t, uint8(7), rts.RNRRetry, "receivers re-post: RNR is transient")
	require.NotZero(t, rts.Timeout)
	require.Less(t, rts.RetryCnt, uint8(7), "rxe retries a count of 7 forever")
	require.NotZero(t, rts.Mask&ibv.AttrSQPSN)
	require.Equal(t, ibv.QPSErr, errAttr().State)
}

func sg(first, count uint32) ibv.Seg { return ibv.Seg{First: first, Count: count} }

func TestPlanWrites(t *testing.T) {
	mk := func(peers ...rdma.PeerID) []rdma.WriteOp {
		ops := make([]rdma.WriteOp, len(peers))
		for i, p := range peers {
			ops[i] = rdma.WriteOp{Peer: p, Local: 1, Length: 8}
		}
		return ops
	}
	all := func(*rdma.WriteOp) verdict { return postNow }
	segs := make([]ibv.Seg, 8)

	n, covered, v := planWrites(mk(0, 0, 0, 0, 0, 0, 1, 1, 0), segs, all)
	require.Equal(t, postNow, v)
	require.Equal(t, 9, covered)
	require.Equal(t, []ibv.Seg{sg(0, 4), sg(4, 2), sg(6, 2), sg(8, 1)}, segs[:n], "chains of at most 4, one peer each")

	// Stops at an op to hold, and at a bad one.
	judge := func(op *rdma.WriteOp) verdict {
		switch op.Peer {
		case 7:
			return holdOp
		case 9:
			return badOp
		}
		return postNow
	}
	n, covered, v = planWrites(mk(0, 0, 7, 0), segs, judge)
	require.Equal(t, holdOp, v)
	require.Equal(t, 2, covered)
	require.Equal(t, []ibv.Seg{sg(0, 2)}, segs[:n])
	n, covered, v = planWrites(mk(9, 0), segs, judge)
	require.Equal(t, badOp, v)
	require.Zero(t, covered)
	require.Zero(t, n)

	// Stops when the segment buffer is full.
	n, covered, v = planWrites(mk(0, 1, 0, 1, 0), segs[:3], all)
	require.Equal(t, postNow, v)
	require.Equal(t, 3, covered)
	require.Equal(t, 3, n)

	require.True(t, validWrite(&rdma.WriteOp{}), "immediate-only")
	require.False(t, validWrite(&rdma.WriteOp{Local: 1, Length: 1 << 32}))
	require.False(t, validWrite(&rdma.WriteOp{Length: 8}), "data without a source")
}

func TestUDAddr(t *testing.T) {
	a := udAddr{Link: ibv.LinkEthernet, GID: gidOf("10.99.0.1"), QPN: 0x12345, LID: 0}
	fa := a.address()
	require.False(t, fa.IsZero())
	back, err := parseUDAddr(fa.Raw())
	require.NoError(t, err)
	require.Equal(t, a, back)
	// Through the text form, as peers exchange it.
	txt, err := rdma.ParseAddress(fa.String())
	require.NoError(t, err)
	require.Equal(t, fa, txt)

	raw := fa.Raw()
	for name, bad := range map[string][]byte{
		"short":   raw[:10],
		"version": append([]byte{9}, raw[1:]...),
		"link":    append([]byte{1, 7}, raw[2:]...),
		"qpn 0":   append(append([]byte(nil), raw[:18]...), 0, 0, 0, 0, 0, 0),
	} {
		_, err := parseUDAddr(bad)
		require.ErrorIs(t, err, rdma.ErrBadEncoding, name)
	}
}

func TestWRID(t *testing.T) {
	for _, k := range []wrKind{wrWrite, wrSend, wrRecv, wrImm, wrUDRecv, wrUDSend} {
		id := wrID(k, 0xfffffffe)
		gk, slot := splitWRID(id)
		require.Equal(t, k, gk)
		require.Equal(t, uint32(0xfffffffe), slot)
	}
}

func TestLinkSpeed(t *testing.T) {
	for in, want := range map[string]uint64{
		"400 Gb/sec (4X NDR)": 400e9,
		"2.5 Gb/sec (1X SDR)": 2.5e9,
		"100 Gb/sec (4X EDR)": 100e9,
		"":                    0,
		"weird":               0,
	} {
		require.Equal(t, want, parseRate(in), in)
	}
	require.Equal(t, uint64(100e9), linkSpeed(2, 32))  // 4x EDR
	require.Equal(t, uint64(400e9), linkSpeed(2, 128)) // 4x NDR
	require.Equal(t, uint64(2.5e9), linkSpeed(1, 1))
	require.Zero(t, linkSpeed(0, 0))
}

func TestDescribeEvent(t *testing.T) {
	require.NoError(t, describeEvent(rdma.Event{Kind: rdma.EventWrite}))
	err := describeEvent(rdma.Event{Kind: rdma.EventWrite, Errno: int32(syscall.ETIMEDOUT), ProvErrno: provErrHandshake})
	require.ErrorIs(t, err, rdma.ErrTimeout)
	require.ErrorIs(t, err, rdma.ErrProvider)
	require.ErrorIs(t, err, rdma.ErrPeerLost, "a handshake nobody answered blames the peer")
	err = describeEvent(rdma.Event{Kind: rdma.EventSend, Errno: int32(syscall.EACCES), ProvErrno: 10})
	require.ErrorIs(t, err, rdma.ErrProvider)
	require.False(t, errors.Is(err, rdma.ErrTimeout))
	require.False(t, errors.Is(err, rdma.ErrPeerLost), "a remote access error is the op's")
	var pe *rdma.ProviderError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "verbs", pe.Provider)
	require.Equal(t, 10, pe.ProvErrno)
	err = describeEvent(rdma.Event{Kind: rdma.EventSend, Errno: int32(syscall.ECONNREFUSED), ProvErrno: provErrConnect})
	require.ErrorIs(t, err, rdma.ErrProvider)
	require.False(t, errors.Is(err, rdma.ErrTimeout))
	// IBV_WC_RETRY_EXC_ERR (12): the remote HCA stopped acknowledging.
	err = describeEvent(rdma.Event{Kind: rdma.EventWrite, Errno: int32(syscall.EHOSTUNREACH), ProvErrno: 12})
	require.ErrorIs(t, err, rdma.ErrPeerLost)
	require.False(t, errors.Is(err, rdma.ErrTimeout))
	// IBV_WC_WR_FLUSH_ERR (5): this side reset the queue pair.
	err = describeEvent(rdma.Event{Kind: rdma.EventWrite, Errno: int32(syscall.ECANCELED), ProvErrno: 5})
	require.False(t, errors.Is(err, rdma.ErrPeerLost))
}

func TestWrapErr(t *testing.T) {
	require.NoError(t, wrapErr("x", nil))
	err := wrapErr("register memory", &ibv.OpError{Op: "ibv_reg_mr", Errno: ibv.Errno(syscall.ENOMEM)})
	require.ErrorIs(t, err, rdma.ErrProvider)
	require.ErrorIs(t, err, syscall.ENOMEM)
	var pe *rdma.ProviderError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, int(syscall.ENOMEM), pe.Errno)
	err = wrapErr("register memory", &ibv.OpError{Op: "ibv_reg_dmabuf_mr", Errno: ibv.Errno(syscall.EOPNOTSUPP)})
	require.ErrorIs(t, err, rdma.ErrNotSupported)
}

func TestProviderRegistered(t *testing.T) {
	require.Contains(t, rdma.Providers(), "verbs")
	require.Equal(t, []string{"verbs"}, Provider{}.Transports())
	_, err := Provider{}.Domains("efa", rdma.DomainOptions{})
	require.ErrorIs(t, err, rdma.ErrUnknownProvider)
}

// TestNoDevice checks the contract on machines without RDMA: an error
// wrapping ErrNotSupported, never a bare one and never a crash.
func TestNoDevice(t *testing.T) {
	devs, err := Devices()
	if err == nil {
		t.Skipf("this machine has %d verbs device(s); the no-device path is not reachable", len(devs))
	}
	require.ErrorIs(t, err, rdma.ErrNotSupported)
	require.NotEqual(t, rdma.ErrNotSupported, err, "wrapped, with the reason")
	_, err = Provider{}.Domains("verbs", rdma.DomainOptions{})
	require.ErrorIs(t, err, rdma.ErrNotSupported)
	_, err = Open(rdma.DomainInfo{Name: "mlx5_0"}, rdma.DomainOptions{})
	require.ErrorIs(t, err, rdma.ErrNotSupported)
	_, err = fabric.ChooseTransport("verbs", rdma.DomainOptions{})
	require.ErrorIs(t, err, rdma.ErrNotSupported)
}

// TestPCIOf reads a fake sysfs tree shaped like a ConnectX function, a
// software device (rxe: no device link) and a non-PCI parent.
func TestPCIOf(t *testing.T) {
	root := t.TempDir()
	fn := filepath.Join(root, "devices/pci0000:16/0000:16:02.0/0000:17:00.0")
	require.NoError(t, os.MkdirAll(fn, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(fn, "numa_node"), []byte("1\n"), 0o644))
	mlx := filepath.Join(root, "class/infiniband/mlx5_0")
	require.NoError(t, os.MkdirAll(mlx, 0o755))
	require.NoError(t, os.Symlink(fn, filepath.Join(mlx, "device")))
	pci, numa := pciOf(mlx)
	require.Equal(t, "0000:17:00.0", pci)
	require.Equal(t, 1, numa)

	rxe := filepath.Join(root, "class/infiniband/rxe0")
	require.NoError(t, os.MkdirAll(rxe, 0o755))
	pci, numa = pciOf(rxe)
	require.Empty(t, pci)
	require.Equal(t, -1, numa)

	virt := filepath.Join(root, "devices/virtual/foo")
	require.NoError(t, os.MkdirAll(virt, 0o755))
	other := filepath.Join(root, "class/infiniband/other0")
	require.NoError(t, os.MkdirAll(other, 0o755))
	require.NoError(t, os.Symlink(virt, filepath.Join(other, "device")))
	pci, _ = pciOf(other)
	require.Empty(t, pci)
	pci, numa = pciOf("")
	require.Empty(t, pci)
	require.Equal(t, -1, numa)
}

// BenchmarkPlanWrites: the Go side of PostWrites for a batch of 1024 paged
// writes spread over 8 peers in runs of 16 (chains of 4), per op.
func BenchmarkPlanWrites(b *testing.B) {
	ops := make([]rdma.WriteOp, 1024)
	for i := range ops {
		ops[i] = rdma.WriteOp{Peer: rdma.PeerID(i / 16 % 8), Local: 1, Length: 4096}
	}
	segs := make([]ibv.Seg, 64)
	judge := func(op *rdma.WriteOp) verdict {
		if validWrite(op) {
			return postNow
		}
		return badOp
	}
	b.ReportAllocs()
	for b.Loop() {
		for left := ops; len(left) > 0; {
			_, covered, _ := planWrites(left, segs, judge)
			left = left[covered:]
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ops)), "ns/write")
}
