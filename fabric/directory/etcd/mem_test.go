package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/directory"
	_ "github.com/ferryrdma/ferry/memfabric" // the mem transport
)

// memPair opens two mem engines and returns a function writing 64 bytes
// from a to a region of b. The engines check their peers themselves every
// liveness interval (negative: never).
func memPair(t *testing.T, liveness time.Duration) (a, b *fabric.Engine, write func() error) {
	t.Helper()
	open := func() *fabric.Engine {
		e, err := fabric.Open(context.Background(), fabric.Config{Transport: "mem", LivenessInterval: liveness})
		require.NoError(t, err)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, e.Close(ctx))
		})
		return e
	}
	a, b = open(), open()
	sbuf, err := fabric.AllocHost(4096)
	require.NoError(t, err)
	dbuf, err := fabric.AllocHost(4096)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sbuf.Free(); _ = dbuf.Free() })
	src, err := a.RegisterHost(sbuf, fabric.AccessLocal)
	require.NoError(t, err)
	dst, err := b.RegisterHost(dbuf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	desc, err := dst.Descriptor()
	require.NoError(t, err)
	return a, b, func() error {
		tr := fabric.NewTransfer()
		if err := a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 64, Dst: desc}, fabric.Notify(tr)); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return tr.Wait(ctx)
	}
}

// regionDesc returns the text form of a descriptor over b's first
// address(es), matching b's entry e.
func regionDesc(t *testing.T, b *fabric.Engine, e directory.Entry) string {
	t.Helper()
	d := fabric.Descriptor{Base: 4096, Length: 4096}
	for i := range e.NICs {
		d.NICs = append(d.NICs, fabric.RemoteKey{Addr: e.Addrs[i], Key: uint64(i + 1), Mode: fabric.AddrVirtual})
	}
	return d.String()
}
