package fabrictest

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// testSingle: every shard count and every pinned NIC, with the immediate
// count of §2.3 checked request by request: n shards deliver n immediates
// (empty shards included), pinned delivers one.
func testSingle(t *testing.T, p Params) {
	env := NewEnv(t, p)
	imms := Collect(env.B)
	var want int64
	check := func(route fabric.Routing, shards int, off, dstOff, n uint64, imm uint32) {
		t.Helper()
		clear(env.Dst.Bytes()[dstOff : dstOff+n])
		err := Wait(t, func(c fabric.Completion) error {
			return env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, SrcOffset: off, Length: n,
				Dst: env.Desc, DstOffset: dstOff, Imm: fabric.Immediate(imm), Route: route}, c)
		})
		require.NoError(t, err)
		want += int64(shards)
		imms.WaitTotal(t, want)
		require.Equal(t, shards, imms.Count(imm), "immediates for %d shards", shards)
		require.Equal(t, env.Src.Bytes()[off:off+n], env.Dst.Bytes()[dstOff:dstOff+n])
	}
	imm := uint32(1000)
	for n := 1; n <= p.NICs; n++ {
		for _, size := range []uint64{1, 1000, 8192, 8193, 3*8192 + 17, 1 << 20} {
			imm++
			check(fabric.Sharded(n), n, 1024, 4096, size, imm)
		}
	}
	for d := 0; d < p.NICs; d++ {
		imm++
		check(fabric.Pinned(d), 1, 10, 20, 70000, imm)
	}
	imm++
	check(fabric.Sharded(0), p.NICs, 0, 0, 12345, imm)
	// Without an immediate nothing arrives.
	require.NoError(t, Wait(t, func(c fabric.Completion) error {
		return env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, Length: 4096, Dst: env.Desc}, c)
	}))
	Settle()
	require.Equal(t, want, imms.n.Load())
}

// testSingleAtEnd: a sharded write ending exactly at the end of the
// destination region succeeds (empty shards are posted at offset 0).
func testSingleAtEnd(t *testing.T, p Params) {
	env := NewEnv(t, p)
	imms := Collect(env.B)
	off := uint64(BufSize - 128)
	err := Wait(t, func(c fabric.Completion) error {
		return env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, SrcOffset: off, Length: 128,
			Dst: env.Desc, DstOffset: off, Imm: fabric.Immediate(9)}, c)
	})
	require.NoError(t, err)
	imms.WaitTotal(t, int64(p.NICs))
	require.Equal(t, env.Src.Bytes()[off:], env.Dst.Bytes()[off:])
}

// testRoundRobinMix interleaves paged and sharded single writes so the
// round-robin cursor is at every position when a single write starts: each
// shard must be posted on the NIC whose keys it carries.
func testRoundRobinMix(t *testing.T, p Params) {
	env := NewEnv(t, p)
	ctr, err := env.B.ImmCounter(0x55)
	require.NoError(t, err)
	for i := 0; i < 3*p.NICs; i++ {
		pages := []uint32{uint32(i)}
		require.NoError(t, Wait(t, func(c fabric.Completion) error {
			return env.A.SubmitPaged(fabric.PagedWrite{Src: env.SrcReg, SrcPages: pages, SrcStride: 4096,
				Dst: env.Desc, DstPages: pages, DstStride: 4096, Length: 4096, Imm: fabric.Immediate(0x55)}, c)
		}))
		off := uint64(1<<20 + i*65536)
		shards := max(1, p.NICs-1)
		require.NoError(t, Wait(t, func(c fabric.Completion) error {
			return env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, SrcOffset: off, Length: 40000,
				Dst: env.Desc, DstOffset: off, Imm: fabric.Immediate(0x55), Route: fabric.Sharded(shards)}, c)
		}))
		// The initiator's completion does not mean the bytes are visible at
		// the target: the immediates do.
		require.NoError(t, ctr.Wait(Ctx(t), int64(1+shards)))
		require.Equal(t, env.Src.Bytes()[off:off+40000], env.Dst.Bytes()[off:off+40000])
	}
}

// testPaged: random page indices (duplicates allowed), strides and offsets,
// verified byte for byte; one immediate per page.
func testPaged(t *testing.T, p Params) {
	env := NewEnv(t, p)
	imms := Collect(env.B)
	r := rand.New(rand.NewPCG(0x123, 7))
	for _, tc := range []struct{ pageLen, pages int }{{128, 2}, {10000, 200}, {1, 33}, {4096, 7}} {
		stride := uint64(tc.pageLen + 128)
		maxPages := (BufSize - 1024) / int(stride)
		src := make([]uint32, tc.pages)
		dst := make([]uint32, tc.pages)
		for i := range src {
			src[i] = uint32(r.IntN(maxPages))
			dst[i] = uint32(i) // distinct destinations so each page is checkable
		}
		imm := uint32(2000 + tc.pages)
		before := imms.n.Load()
		require.NoError(t, Wait(t, func(c fabric.Completion) error {
			return env.A.SubmitPaged(fabric.PagedWrite{Src: env.SrcReg, SrcPages: src, SrcStride: stride, SrcOffset: 1024,
				Dst: env.Desc, DstPages: dst, DstStride: stride, DstOffset: 1024, Length: uint64(tc.pageLen),
				Imm: fabric.Immediate(imm)}, c)
		}))
		imms.WaitTotal(t, before+int64(tc.pages))
		require.Equal(t, tc.pages, imms.Count(imm))
		for i := range src {
			so := 1024 + stride*uint64(src[i])
			do := 1024 + stride*uint64(dst[i])
			require.Equal(t, env.Src.Bytes()[so:so+uint64(tc.pageLen)], env.Dst.Bytes()[do:do+uint64(tc.pageLen)], "page %d", i)
		}
	}
}

// testPagedMany posts far more writes than fit in flight, so the provider
// pushes back (EAGAIN) and the engine's FIFOs must carry the rest.
func testPagedMany(t *testing.T, p Params) {
	env := NewEnv(t, p)
	const pages = 5000
	idx := make([]uint32, pages)
	for i := range idx {
		idx[i] = uint32(i)
	}
	ctr, err := env.B.ImmCounter(77)
	require.NoError(t, err)
	tc := new(fabric.TransferCounter)
	for k := 0; k < 4; k++ {
		require.NoError(t, env.A.SubmitPaged(fabric.PagedWrite{Src: env.SrcReg, SrcPages: idx, SrcStride: 64,
			Dst: env.Desc, DstPages: idx, DstStride: 64, Length: 64, Imm: fabric.Immediate(77)}, fabric.Count(tc)))
	}
	require.NoError(t, tc.Wait(Ctx(t), 4))
	require.Zero(t, tc.Errors())
	require.NoError(t, ctr.Wait(Ctx(t), 4*pages))
	require.Equal(t, env.Src.Bytes()[:64*pages], env.Dst.Bytes()[:64*pages])
}
