package fabric_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	_ "github.com/ferryrdma/ferry/memfabric"
)

func openMem(t *testing.T, nics int) *fabric.Engine {
	t.Helper()
	e, err := fabric.Open(context.Background(), fabric.Config{Transport: "mem", NICs: nics})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, e.Close(ctx))
	})
	return e
}

func TestMemSmoke(t *testing.T) {
	for _, nics := range []int{1, 2, 4} {
		a, b := openMem(t, nics), openMem(t, nics)
		src, err := fabric.AllocHost(1 << 20)
		require.NoError(t, err)
		defer src.Free()
		dst, err := fabric.AllocHost(1 << 20)
		require.NoError(t, err)
		defer dst.Free()
		for i := range src.Bytes() {
			src.Bytes()[i] = byte(i * 7)
		}
		sr, err := a.RegisterHost(src, fabric.AccessLocal)
		require.NoError(t, err)
		dr, err := b.RegisterHost(dst, fabric.AccessRemoteWrite)
		require.NoError(t, err)
		desc, err := dr.Descriptor()
		require.NoError(t, err)
		ctr, err := b.ImmCounter(7)
		require.NoError(t, err)
		tr := fabric.NewTransfer()
		require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: sr, SrcOffset: 100, Length: 50000, Dst: desc, DstOffset: 200, Imm: fabric.Immediate(7)}, fabric.Notify(tr)))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, tr.Wait(ctx))
		require.NoError(t, ctr.Wait(ctx, int64(nics)))
		require.Equal(t, src.Bytes()[100:50100], dst.Bytes()[200:50200])
	}
}
