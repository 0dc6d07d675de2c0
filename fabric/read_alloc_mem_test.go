package fabric_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// Reads ride the write path turned around: in steady state a single, a
// paged and a scatter read (its sources viewed as targets, not copied)
// allocate nothing.
func TestReadAllocations(t *testing.T) {
	e := openMem(t, 2)
	peer := openMem(t, 2)
	buf, err := fabric.AllocHost(1 << 16)
	require.NoError(t, err)
	defer buf.Free()
	pbuf, err := fabric.AllocHost(1 << 16)
	require.NoError(t, err)
	defer pbuf.Free()
	dst, err := e.RegisterHost(buf, fabric.AccessLocal)
	require.NoError(t, err)
	readable, err := peer.RegisterHost(pbuf, fabric.AccessRemoteRead)
	require.NoError(t, err)
	desc, err := readable.Descriptor()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	tr := fabric.NewTransfer()
	srcPages, dstPages := []uint32{0, 1, 2}, []uint32{2, 1, 0}
	sources := []fabric.ScatterSource{{Src: desc, Length: 100}, {Src: desc, Length: 300, SrcOffset: 7, DstOffset: 128}}
	for _, tt := range []struct {
		name string
		run  func()
	}{
		{"single, sharded", func() {
			require.NoError(t, e.SubmitRead(fabric.SingleRead{Dst: dst, Length: 40000, Src: desc}, fabric.Notify(tr)))
			require.NoError(t, tr.Wait(ctx))
		}},
		{"paged", func() {
			require.NoError(t, e.SubmitPagedRead(fabric.PagedRead{Dst: dst, DstPages: dstPages, DstStride: 256,
				Src: desc, SrcPages: srcPages, SrcStride: 256, Length: 64}, fabric.Notify(tr)))
			require.NoError(t, tr.Wait(ctx))
		}},
		{"scatter, shard bytes", func() {
			require.NoError(t, e.SubmitScatterRead(fabric.ScatterRead{Dst: dst, Sources: sources, Route: fabric.ShardBytes()},
				fabric.Notify(tr)))
			require.NoError(t, tr.Wait(ctx))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for range 2000 { // warm the pools
				tt.run()
			}
			allocs := testing.AllocsPerRun(2000, tt.run)
			require.LessOrEqual(t, allocs, 0.05, "allocations per read in steady state")
		})
	}
}
