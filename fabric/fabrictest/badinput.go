package fabrictest

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// testBadInput: each bad request is refused with its typed error, nothing
// is posted, nothing hangs, and the engine keeps working.
func testBadInput(t *testing.T, p Params) {
	env := NewEnv(t, p)
	none := fabric.Completion{}
	other, err := env.B.RegisterHost(env.Dst, fabric.AccessLocal)
	require.NoError(t, err)
	gone, err := env.A.RegisterHost(env.Src, fabric.AccessLocal)
	require.NoError(t, err)
	require.NoError(t, env.A.Unregister(gone))
	require.ErrorIs(t, env.A.Unregister(gone), fabric.ErrUnknownRegion)
	require.ErrorIs(t, env.A.Unregister(nil), fabric.ErrUnknownRegion)

	single := func(w fabric.SingleWrite) error { return env.A.SubmitSingle(w, none) }
	for name, src := range map[string]*fabric.MemoryRegion{"nil": nil, "other engine": other, "unregistered": gone} {
		err := single(fabric.SingleWrite{Src: src, Length: 1, Dst: env.Desc})
		require.ErrorIs(t, err, fabric.ErrUnknownRegion, name)
		var re *fabric.RequestError
		require.ErrorAs(t, err, &re)
	}
	require.ErrorIs(t, single(fabric.SingleWrite{Src: env.SrcReg, Length: 2, Dst: env.Desc, DstOffset: BufSize - 1}), fabric.ErrOutOfBounds)
	require.ErrorIs(t, single(fabric.SingleWrite{Src: env.SrcReg, Length: 1 << 62, Dst: env.Desc}), fabric.ErrOutOfBounds)
	require.ErrorIs(t, single(fabric.SingleWrite{Src: env.SrcReg, SrcOffset: BufSize, Length: 1, Dst: env.Desc}), fabric.ErrOutOfBounds)
	require.ErrorIs(t, single(fabric.SingleWrite{Src: env.SrcReg, Length: 1, Dst: env.Desc, Route: fabric.Sharded(p.NICs + 1)}), fabric.ErrInvalidArgument)
	require.ErrorIs(t, single(fabric.SingleWrite{Src: env.SrcReg, Length: 1, Dst: env.Desc, Route: fabric.Pinned(p.NICs)}), fabric.ErrInvalidArgument)
	require.ErrorIs(t, single(fabric.SingleWrite{Src: env.SrcReg, Length: 1}), fabric.ErrInvalidArgument)
	// A descriptor may list fewer or more NICs than the writer has
	// (RunPairings), but never more than any group has.
	wide := env.Desc
	wide.NICs = nil
	for len(wide.NICs) <= fabric.MaxNICs {
		wide.NICs = append(wide.NICs, env.Desc.NICs[0])
	}
	require.ErrorIs(t, single(fabric.SingleWrite{Src: env.SrcReg, Length: 1, Dst: wide}), fabric.ErrNICMismatch)

	paged := func(w fabric.PagedWrite) error { return env.A.SubmitPaged(w, none) }
	require.ErrorIs(t, paged(fabric.PagedWrite{Src: env.SrcReg, SrcPages: []uint32{1, 2}, DstPages: []uint32{1}, Dst: env.Desc, Length: 8}), fabric.ErrInvalidArgument)
	require.ErrorIs(t, paged(fabric.PagedWrite{Src: env.SrcReg, Dst: env.Desc, Length: 8}), fabric.ErrInvalidArgument)
	require.ErrorIs(t, paged(fabric.PagedWrite{Src: env.SrcReg, SrcPages: []uint32{0}, DstPages: []uint32{1 << 20}, DstStride: 4096, Dst: env.Desc, Length: 8}), fabric.ErrOutOfBounds)
	require.ErrorIs(t, paged(fabric.PagedWrite{Src: env.SrcReg, SrcPages: []uint32{1 << 31}, DstPages: []uint32{0}, SrcStride: 1 << 40, Dst: env.Desc, Length: 8}), fabric.ErrOutOfBounds)

	require.ErrorIs(t, env.A.SubmitScatter(fabric.ScatterWrite{Src: env.SrcReg}, none), fabric.ErrInvalidArgument)
	require.ErrorIs(t, env.A.SubmitScatter(fabric.ScatterWrite{Src: env.SrcReg, Targets: []fabric.ScatterTarget{{Dst: env.Desc, Length: BufSize + 1}}}, none), fabric.ErrOutOfBounds)
	require.ErrorIs(t, env.A.SubmitScatter(fabric.ScatterWrite{Src: env.SrcReg, Targets: []fabric.ScatterTarget{{Dst: env.Desc, Length: 1}}, Route: fabric.ScatterPinned(p.NICs)}, none), fabric.ErrInvalidArgument)
	require.ErrorIs(t, env.A.SubmitBarrier(fabric.Barrier{Imm: 1}, none), fabric.ErrInvalidArgument)
	require.ErrorIs(t, env.A.SubmitImm(fabric.ImmWrite{Imm: 1}, none), fabric.ErrInvalidArgument)
	_, err = env.A.Register(fabric.MemorySpan{}, fabric.AccessLocal)
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)
	_, err = env.A.Register(fabric.MemorySpan{Addr: 4096, Len: 4096, Device: fabric.CUDADevice(7)}, fabric.AccessLocal)
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)
	_, err = env.A.AddPeerGroup(fabric.HostDevice, [][]fabric.Address{{}})
	require.Error(t, err)
	_, err = env.SrcReg.Descriptor()
	require.ErrorIs(t, err, fabric.ErrInvalidArgument, "local-only regions have no descriptor")

	// Garbage descriptor and address bytes never decode into something usable.
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200; i++ {
		b := make([]byte, r.IntN(80))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		var d fabric.Descriptor
		if err := d.UnmarshalBinary(b); err != nil {
			require.ErrorIs(t, err, fabric.ErrBadEncoding)
		}
		var a fabric.Address
		if err := a.UnmarshalBinary(b); err != nil {
			require.ErrorIs(t, err, fabric.ErrBadEncoding)
		}
	}
	_, err = fabric.ParseDescriptor("zz")
	require.ErrorIs(t, err, fabric.ErrBadEncoding)
	bin, err := env.Desc.MarshalBinary()
	require.NoError(t, err)
	var d fabric.Descriptor
	require.ErrorIs(t, d.UnmarshalBinary(bin[:len(bin)-1]), fabric.ErrBadEncoding)
	require.ErrorIs(t, d.UnmarshalBinary(append(bin, 0)), fabric.ErrBadEncoding)

	// Still working after all that.
	require.NoError(t, Wait(t, func(c fabric.Completion) error {
		return env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, Length: 64, Dst: env.Desc}, c)
	}))
	require.Zero(t, env.A.Stats().Failed)
}
