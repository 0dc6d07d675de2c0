package fabric_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// TestConfigRefusesBadValues: negative counts and an oversized send pool
// are refused at Open instead of being replaced by defaults or failing at
// the first Send.
func TestConfigRefusesBadValues(t *testing.T) {
	for name, cfg := range map[string]fabric.Config{
		"nics -3":            {NICs: -3},
		"group nics -1":      {Groups: []fabric.GroupSpec{{Device: fabric.HostDevice, NICs: -1}}},
		"queue depth -1":     {QueueDepth: -1},
		"max pending -5":     {MaxPending: -5},
		"1 TiB send pool":    {SendBuffers: 1 << 20, SendBufferSize: 1 << 20},
		"negative buffers":   {SendBuffers: -1},
		"negative handshake": {HandshakeTimeout: -time.Second},
	} {
		cfg.Transport = "mem"
		e, err := fabric.Open(context.Background(), cfg)
		if e != nil {
			_ = e.Close(context.Background())
		}
		require.ErrorIs(t, err, fabric.ErrInvalidArgument, name)
	}
}

// TestDescriptorChecks: descriptors no registration can produce are
// refused at submit; stale and forged descriptors of this process's own
// regions are caught when the write is accepted.
func TestDescriptorChecks(t *testing.T) {
	a, b, src, desc := memPair(t, fabric.Config{})
	w := fabric.SingleWrite{Src: src, Length: 64}
	bad := func(mut func(d *fabric.Descriptor)) error {
		d := desc
		d.NICs = append([]fabric.RemoteKey(nil), desc.NICs...)
		mut(&d)
		w.Dst = d
		return a.SubmitSingle(w, fabric.Completion{})
	}
	require.ErrorIs(t, bad(func(d *fabric.Descriptor) { d.NICs[0].Mode = 0 }), fabric.ErrInvalidArgument, "address mode 0")
	require.ErrorIs(t, bad(func(d *fabric.Descriptor) { d.NICs[0].Addr = fabric.Address{} }), fabric.ErrInvalidArgument, "empty address")
	require.ErrorIs(t, bad(func(d *fabric.Descriptor) { d.Base = ^uint64(0) - 10 }), fabric.ErrInvalidArgument, "wrapping range")

	accepted := func(d fabric.Descriptor) error {
		tr := fabric.NewTransfer()
		require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 64, Dst: d}, fabric.Notify(tr)))
		return tr.Wait(waitCtx(t))
	}
	forged := desc
	forged.NICs = []fabric.RemoteKey{desc.NICs[0]}
	forged.NICs[0].Key ^= 0x5a5a
	require.ErrorIs(t, accepted(forged), fabric.ErrUnknownRegion, "forged key")
	long := desc
	long.Length *= 2
	require.ErrorIs(t, accepted(long), fabric.ErrOutOfBounds, "forged length")
	require.NoError(t, accepted(desc))

	buf, err := fabric.AllocHost(4096)
	require.NoError(t, err)
	defer buf.Free()
	r, err := b.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	stale, _ := r.Descriptor()
	require.NoError(t, b.Unregister(r))
	require.ErrorIs(t, accepted(stale), fabric.ErrUnknownRegion, "stale descriptor")
}

// TestWriteToClosedLocalEngine: a write to an engine of this process that
// has closed fails with ErrPeerLost (the peer is gone for good), not a
// timeout, and so does the next one.
func TestWriteToClosedLocalEngine(t *testing.T) {
	a, _, src, _ := memPair(t, fabric.Config{})
	c, err := fabric.Open(context.Background(), fabric.Config{Transport: "mem"})
	require.NoError(t, err)
	buf, err := fabric.AllocHost(4096)
	require.NoError(t, err)
	defer buf.Free()
	r, err := c.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	d, _ := r.Descriptor()
	tr := fabric.NewTransfer()
	require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 64, Dst: d}, fabric.Notify(tr)))
	require.NoError(t, tr.Wait(waitCtx(t)))
	require.NoError(t, c.Close(context.Background()))
	for i := 0; i < 2; i++ {
		require.NoError(t, a.SubmitSingle(fabric.SingleWrite{Src: src, Length: 64, Dst: d}, fabric.Notify(tr)))
		require.ErrorIs(t, tr.Wait(waitCtx(t)), fabric.ErrPeerLost)
	}
}
