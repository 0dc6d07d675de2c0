package fabric_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/memfabric"
)

// TestReadErrorsNameReads checks that the errors of reads name them reads:
// the worker keeps reads under the request kinds of writes (with a read
// flag), and a read that passed its deadline was reported as a "single
// write" or "paged write".
func TestReadErrorsNameReads(t *testing.T) {
	var engines []*fabric.Engine
	a, b, _, _ := errPair(t, &engines, fabric.Config{})
	defer func() {
		for _, e := range engines {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			_ = e.Close(ctx)
			cancel()
		}
	}()
	lbuf, err := fabric.AllocHost(1 << 16)
	require.NoError(t, err)
	rbuf, err := fabric.AllocHost(1 << 16)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lbuf.Free(); _ = rbuf.Free() })
	local, err := a.RegisterHost(lbuf, fabric.AccessLocal)
	require.NoError(t, err)
	remote, err := b.RegisterHost(rbuf, fabric.AccessRemoteRead)
	require.NoError(t, err)
	desc, err := remote.Descriptor()
	require.NoError(t, err)
	require.NoError(t, memfabric.Inject(a.Info().Groups[0].Domains[0].Address, memfabric.Faults{HoldWrites: true}))

	pages := []uint32{0, 1}
	for _, c := range []struct {
		name   string
		submit func(fabric.Completion) error
	}{
		{"single read", func(c fabric.Completion) error {
			return a.SubmitRead(fabric.SingleRead{Dst: local, Src: desc, Length: 64}, c)
		}},
		{"paged read", func(c fabric.Completion) error {
			return a.SubmitPagedRead(fabric.PagedRead{Dst: local, DstPages: pages, DstStride: 64,
				Src: desc, SrcPages: pages, SrcStride: 64, Length: 64}, c)
		}},
	} {
		tr := fabric.NewTransfer()
		require.NoError(t, c.submit(fabric.Notify(tr).WithDeadline(time.Now().Add(20*time.Millisecond))), c.name)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := tr.Wait(ctx)
		cancel()
		require.True(t, errors.Is(err, fabric.ErrTimeout), "%s: %v, want ErrTimeout", c.name, err)
		require.Contains(t, err.Error(), c.name+":", c.name)
		require.NotContains(t, err.Error(), "write", c.name)
	}
}
