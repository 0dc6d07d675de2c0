package fabrictest

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// GroupSizes are the NIC counts a group may have; RunPairings runs every
// pairing of them.
var GroupSizes = []int{1, 2, 4}

// RunPairings runs the unequal-group scenarios for every pairing of writer
// and target NIC counts in GroupSizes over p's transport (p.NICs and
// p.TargetNICs are ignored).
func RunPairings(t *testing.T, p Params) {
	for _, n := range GroupSizes {
		for _, m := range GroupSizes {
			runPair(t, p, n, m)
		}
	}
}

// PairingsEnv set to "all" makes RunPairingsSubset run every pairing
// (make test-pairings).
const PairingsEnv = "FERRY_TEST_PAIRINGS"

// RunPairingsSubset runs the widest unequal pairings, 1 to 4 and 4 to 1
// NICs, for transports whose engines are slow to open; with PairingsEnv
// set to "all" it runs every pairing, as RunPairings does.
func RunPairingsSubset(t *testing.T, p Params) {
	if os.Getenv(PairingsEnv) == "all" {
		RunPairings(t, p)
		return
	}
	runPair(t, p, 1, 4)
	runPair(t, p, 4, 1)
}

func runPair(t *testing.T, p Params, n, m int) {
	p.NICs, p.TargetNICs = n, m
	t.Run(fmt.Sprintf("%dto%d", n, m), func(t *testing.T) { RunPairing(t, p) })
}

// RunPairing runs the scenarios whose immediate counts depend on both
// group sizes between a writer of p.NICs and a target of p.TargetNICs:
// every request shape, its bytes verified and the immediates the target
// receives checked, request by request, against fabric.ExpectedImms.
func RunPairing(t *testing.T, p Params) {
	env := NewEnv(t, p)
	n, m := p.NICs, p.targetNICs()
	require.Equal(t, n, env.A.NICs())
	require.Equal(t, m, env.B.NICs())
	require.Len(t, env.Desc.NICs, m, "the target's descriptor lists its own NICs")
	imms := Collect(env.B)
	var total int64
	imm := uint32(5000)
	// expect waits for the immediates s delivers and checks no more came.
	expect := func(s fabric.Shape, what string) {
		t.Helper()
		want := fabric.ExpectedImms(s, n, m)
		require.Positive(t, want, what)
		total += int64(want)
		imms.WaitTotal(t, total)
		require.Equal(t, want, imms.Count(imm), "%s: immediates for %d to %d nics", what, n, m)
	}
	region := func(off, size uint64) { clear(env.Dst.Bytes()[off : off+size]) }
	same := func(srcOff, dstOff, size uint64, what string) {
		t.Helper()
		require.Equal(t, env.Src.Bytes()[srcOff:srcOff+size], env.Dst.Bytes()[dstOff:dstOff+size], what)
	}

	t.Run("Single", func(t *testing.T) {
		single := func(route fabric.Routing, srcOff, dstOff, size uint64) {
			t.Helper()
			imm++
			region(dstOff, size)
			w := fabric.SingleWrite{Src: env.SrcReg, SrcOffset: srcOff, Length: size, Dst: env.Desc,
				DstOffset: dstOff, Imm: fabric.Immediate(imm), Route: route}
			require.NoError(t, Wait(t, func(c fabric.Completion) error { return env.A.SubmitSingle(w, c) }))
			what := fmt.Sprintf("single %+v of %d bytes", route, size)
			expect(w.Shape(), what)
			same(srcOff, dstOff, size, what)
		}
		// Sharded(0) takes one shard per NIC of the wider side.
		for _, size := range []uint64{1, 100, 8193, 3*8192 + 17, 1 << 20} {
			single(fabric.Sharded(0), 64, 4096, size)
		}
		for k := 1; k <= max(n, m); k++ {
			single(fabric.Sharded(k), 7, 8192+3, 40000)
		}
		for d := 0; d < n; d++ {
			single(fabric.Pinned(d), 10, 20, 70000)
		}
		// At the very end of the region: empty shards are posted at
		// offset 0, so they stay in bounds.
		single(fabric.Sharded(0), BufSize-128, BufSize-128, 128)
		err := env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, Length: 1, Dst: env.Desc,
			Route: fabric.Sharded(max(n, m) + 1)}, fabric.Completion{})
		require.ErrorIs(t, err, fabric.ErrInvalidArgument, "more shards than either group has NICs")
	})

	t.Run("Paged", func(t *testing.T) {
		for _, pages := range []int{1, 3, 7, 64} {
			imm++
			const length, stride = 1000, 4096
			src, dst := make([]uint32, pages), make([]uint32, pages)
			for i := range src {
				src[i], dst[i] = uint32(i*3%pages), uint32(pages-1-i)
			}
			region(0, uint64(pages)*stride)
			w := fabric.PagedWrite{Src: env.SrcReg, SrcPages: src, SrcStride: stride, SrcOffset: 5, Dst: env.Desc,
				DstPages: dst, DstStride: stride, DstOffset: 9, Length: length, Imm: fabric.Immediate(imm)}
			require.NoError(t, Wait(t, func(c fabric.Completion) error { return env.A.SubmitPaged(w, c) }))
			expect(w.Shape(), fmt.Sprintf("paged of %d pages", pages))
			for i := range src {
				same(5+stride*uint64(src[i]), 9+stride*uint64(dst[i]), length, fmt.Sprintf("page %d of %d", i, pages))
			}
		}
	})

	t.Run("ImmAndBarrier", func(t *testing.T) {
		for d := 0; d < n; d++ {
			imm++
			require.NoError(t, Wait(t, func(c fabric.Completion) error {
				return env.A.SubmitImm(fabric.ImmWrite{Imm: imm, Dst: env.Desc, Route: fabric.Pinned(d)}, c)
			}))
			expect(fabric.ImmShape(), fmt.Sprintf("imm pinned to nic %d", d))
		}
		imm++
		dsts := []fabric.Descriptor{env.Desc, env.Desc, env.Desc, env.Desc, env.Desc}
		require.NoError(t, Wait(t, func(c fabric.Completion) error {
			return env.A.SubmitBarrier(fabric.Barrier{Imm: imm, Dsts: dsts}, c)
		}))
		expect(fabric.BarrierShape(len(dsts)), "barrier")
	})

	t.Run("Scatter", func(t *testing.T) {
		const targets = 5
		g, err := env.A.AddPeerGroup(fabric.HostDevice, repeatPeer(env.Desc, targets))
		require.NoError(t, err)
		for k, tc := range []struct {
			name  string
			route fabric.ScatterRouting
			group fabric.PeerGroup
			size  uint64
		}{
			{"ShardPeers", fabric.ShardPeers(), fabric.PeerGroup{}, 3001},
			{"ShardPeersGroup", fabric.ShardPeers(), g, 70001},
			{"ShardBytes", fabric.ShardBytes(), fabric.PeerGroup{}, 90003},
			{"ShardBytesGroup", fabric.ShardBytes(), g, 5},
			{"Pinned", fabric.ScatterPinned(n - 1), fabric.PeerGroup{}, 1},
		} {
			imm++
			base := uint64(k) * 600000
			ts := make([]fabric.ScatterTarget, targets)
			for i := range ts {
				ts[i] = fabric.ScatterTarget{Dst: env.Desc, Length: tc.size + uint64(i),
					SrcOffset: base + uint64(i)*100000, DstOffset: base + uint64(i)*100000 + 11}
				region(ts[i].DstOffset, ts[i].Length)
			}
			w := fabric.ScatterWrite{Src: env.SrcReg, Targets: ts, Imm: fabric.Immediate(imm), Route: tc.route, Group: tc.group}
			require.NoError(t, Wait(t, func(c fabric.Completion) error { return env.A.SubmitScatter(w, c) }), tc.name)
			expect(w.Shape(targets), tc.name)
			for i, tg := range ts {
				same(tg.SrcOffset, tg.DstOffset, tg.Length, fmt.Sprintf("%s target %d", tc.name, i))
			}
		}
	})

	// Reads between unequal groups: the reader's n NICs pull from the
	// target's m. A read delivers no immediate, so the count checked below
	// is unchanged by it.
	t.Run("Read", func(t *testing.T) {
		const size = 2 << 20
		buf, err := fabric.AllocHost(size)
		require.NoError(t, err)
		defer func() { _ = buf.Free() }()
		copy(env.Dst.Bytes(), env.Src.Bytes())
		readable, err := env.B.RegisterHost(env.Dst, fabric.AccessRemoteRead)
		if errors.Is(err, fabric.ErrNotSupported) {
			testutil.Skip(t, FeatureOf(p.Transport), "transport %s has no RDMA READ: %v", p.Transport, err)
		}
		require.NoError(t, err)
		defer func() { require.NoError(t, env.B.Unregister(readable)) }()
		from, err := readable.Descriptor()
		require.NoError(t, err)
		into, err := env.A.RegisterHost(buf, fabric.AccessLocal)
		require.NoError(t, err)
		defer func() { require.NoError(t, env.A.Unregister(into)) }()
		got := func(srcOff, dstOff, length uint64, what string) {
			t.Helper()
			require.Equal(t, env.Dst.Bytes()[srcOff:srcOff+length], buf.Bytes()[dstOff:dstOff+length], what)
		}
		single := func(route fabric.Routing, srcOff, dstOff, length uint64) {
			t.Helper()
			clear(buf.Bytes()[dstOff : dstOff+length])
			r := fabric.SingleRead{Dst: into, DstOffset: dstOff, Length: length, Src: from, SrcOffset: srcOff, Route: route}
			require.NoError(t, Wait(t, func(c fabric.Completion) error { return env.A.SubmitRead(r, c) }))
			got(srcOff, dstOff, length, fmt.Sprintf("read %+v of %d bytes, %d to %d nics", route, length, n, m))
		}
		for _, length := range []uint64{1, 8193, 1<<20 + 3} {
			single(fabric.Sharded(0), 11, 4097, length)
		}
		for k := 1; k <= n; k++ {
			single(fabric.Sharded(k), 3, 5, 40000)
		}
		for d := 0; d < n; d++ {
			single(fabric.Pinned(d), 70, 9, 70000)
		}
		const pages, length, stride = 33, 1000, 4096
		src, dst := make([]uint32, pages), make([]uint32, pages)
		for i := range src {
			src[i], dst[i] = uint32(i*5%pages), uint32(pages-1-i)
		}
		clear(buf.Bytes()[:pages*stride+16])
		r := fabric.PagedRead{Dst: into, DstPages: dst, DstStride: stride, DstOffset: 3, Src: from,
			SrcPages: src, SrcStride: stride, SrcOffset: 13, Length: length}
		require.NoError(t, Wait(t, func(c fabric.Completion) error { return env.A.SubmitPagedRead(r, c) }))
		for i := range src {
			got(13+stride*uint64(src[i]), 3+stride*uint64(dst[i]), length, fmt.Sprintf("read page %d of %d", i, pages))
		}
	})

	// Nothing arrives beyond what ExpectedImms promised.
	Settle()
	require.Equal(t, total, imms.n.Load())
}
