package fabric_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// TestSplitWrites: with a piece size of 4 KiB, single, paged and scatter
// writes of odd lengths (one byte past a piece, several pieces, a scatter
// whose targets need different numbers of pieces, a sharded single over
// two NICs) land exactly and deliver exactly the immediates they would
// unsplit, on a domain that orders writes and on one that does not (the
// last piece then waits for the others).
func TestSplitWrites(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprintf("ordered=%v", ordered), func(t *testing.T) {
			const size = 1 << 20
			const piece = 4096
			a, b := openMem(t, 2), openMem(t, 2)
			require.NoError(t, fabric.SetPieceSize(a, piece, ordered))
			sbuf, err := fabric.AllocHost(size)
			require.NoError(t, err)
			defer sbuf.Free()
			for i := range sbuf.Bytes() {
				sbuf.Bytes()[i] = byte(i*131 + i>>12)
			}
			src, err := a.RegisterHost(sbuf, fabric.AccessLocal)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			imm := uint32(0x700)
			run := func(name string, imms int64, submit func(d fabric.Descriptor, imm uint32, c fabric.Completion) error,
				check func(dst []byte)) {
				t.Helper()
				dbuf, err := fabric.AllocHost(size)
				require.NoError(t, err)
				defer dbuf.Free()
				dr, err := b.RegisterHost(dbuf, fabric.AccessRemoteWrite)
				require.NoError(t, err)
				defer b.Unregister(dr)
				desc, err := dr.Descriptor()
				require.NoError(t, err)
				imm++
				ctr, err := b.ImmCounter(imm)
				require.NoError(t, err)
				tr := fabric.NewTransfer()
				require.NoError(t, submit(desc, imm, fabric.Notify(tr)), name)
				require.NoError(t, tr.Wait(ctx), name)
				require.NoError(t, ctr.Wait(ctx, imms), name)
				check(dbuf.Bytes())
				time.Sleep(20 * time.Millisecond)
				require.Zero(t, ctr.Count(), "%s: immediates beyond the %d expected", name, imms)
			}
			same := func(dst []byte, dOff, sOff, n int) {
				t.Helper()
				require.Equal(t, sbuf.Bytes()[sOff:sOff+n], dst[dOff:dOff+n])
			}
			posted := func() (n uint64) {
				for _, d := range a.Stats().Domains {
					n += d.Posted
				}
				return n
			}
			// Pinned single of 10 pieces and a byte: 11 writes.
			n := 10*piece + 1
			before := posted()
			run("single", 1, func(d fabric.Descriptor, imm uint32, c fabric.Completion) error {
				return a.SubmitSingle(fabric.SingleWrite{Src: src, SrcOffset: 3, Length: uint64(n), Dst: d, DstOffset: 5,
					Imm: fabric.Immediate(imm), Route: fabric.Pinned(1)}, c)
			}, func(dst []byte) { same(dst, 5, 3, n); require.Zero(t, dst[5+n]) })
			require.EqualValues(t, 11, posted()-before, "writes posted for the single")
			// Sharded over both NICs: one immediate per shard.
			run("sharded single", 2, func(d fabric.Descriptor, imm uint32, c fabric.Completion) error {
				return a.SubmitSingle(fabric.SingleWrite{Src: src, Length: uint64(n), Dst: d, Imm: fabric.Immediate(imm)}, c)
			}, func(dst []byte) { same(dst, 0, 0, n) })
			// Paged: three pages of 2.5 pieces, out of order.
			pl := 2*piece + piece/2
			run("paged", 3, func(d fabric.Descriptor, imm uint32, c fabric.Completion) error {
				return a.SubmitPaged(fabric.PagedWrite{Src: src, SrcPages: []uint32{0, 1, 2}, SrcStride: uint64(pl),
					Dst: d, DstPages: []uint32{2, 0, 1}, DstStride: uint64(pl), Length: uint64(pl), Imm: fabric.Immediate(imm)}, c)
			}, func(dst []byte) {
				same(dst, 2*pl, 0, pl)
				same(dst, 0, pl, pl)
				same(dst, pl, 2*pl, pl)
			})
			// Scatter: targets of 1 byte, 5 pieces + 7 and one piece, by
			// bytes over both NICs and by peers.
			for _, route := range []fabric.ScatterRouting{fabric.ShardPeers(), fabric.ShardBytes()} {
				lens := []int{1, 5*piece + 7, piece}
				imms := int64(len(lens))
				if route == fabric.ShardBytes() {
					imms *= 2
				}
				run("scatter", imms, func(d fabric.Descriptor, imm uint32, c fabric.Completion) error {
					var ts []fabric.ScatterTarget
					off := 0
					for i, l := range lens {
						ts = append(ts, fabric.ScatterTarget{Dst: d, Length: uint64(l), SrcOffset: uint64(off + i), DstOffset: uint64(2*off + 1)})
						off += l
					}
					return a.SubmitScatter(fabric.ScatterWrite{Src: src, Targets: ts, Imm: fabric.Immediate(imm), Route: route}, c)
				}, func(dst []byte) {
					off := 0
					for i, l := range lens {
						same(dst, 2*off+1, off+i, l)
						off += l
					}
				})
			}
		})
	}
}
