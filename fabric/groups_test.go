package fabric_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/memfabric"
)

// An engine with a host group and two "GPU" groups (the mem provider takes
// spans labelled with a CUDA device): main is the host group, everywhere;
// registration and unregistration go to the owning worker; nothing is left
// registered at the provider after Close (the reference leaked GPU
// registrations on non-main workers and bouncing buffers).
func TestGroupsMainAndRouting(t *testing.T) {
	before := memfabric.LiveRegistrations()
	e, err := fabric.Open(context.Background(), fabric.Config{Transport: "mem", Groups: []fabric.GroupSpec{
		{Device: fabric.CUDADevice(1), NICs: 2}, {Device: fabric.HostDevice, NICs: 1}, {Device: fabric.CUDADevice(0), NICs: 4},
	}})
	require.NoError(t, err)
	in := e.Info()
	require.Len(t, in.Groups, 3)
	require.Equal(t, fabric.HostDevice, in.Groups[0].Device, "groups are ordered host first")
	require.Equal(t, fabric.HostDevice, e.MainDevice())
	require.Equal(t, in.Groups[0].Domains[0].Address, e.MainAddress())
	require.Equal(t, 1, e.NICs())

	buf, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	defer buf.Free()
	span := buf.Span()
	span.Device = fabric.CUDADevice(0)
	g0, err := e.Register(span, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	d0, _ := g0.Descriptor()
	require.Len(t, d0.NICs, 4, "a region gets one key per NIC of its device's group")
	span.Device = fabric.CUDADevice(1)
	g1, err := e.Register(span, fabric.AccessLocal)
	require.NoError(t, err)
	h, err := e.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	// The same memory registered again with the same access shares the
	// host group's registration (the range cache): a handle of its own,
	// the same keys, nothing new at the provider. The same span labelled
	// with another device is other memory to the cache (g0, g1 above).
	h2, err := e.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	hd2, err := h2.Descriptor()
	require.NoError(t, err)
	hd1, _ := h.Descriptor()
	require.Equal(t, hd1.NICs, hd2.NICs)
	require.EqualValues(t, before+1+4+2+1, memfabric.LiveRegistrations(), "the immediate source on main, then the regions")
	require.NoError(t, e.Unregister(g1))
	require.EqualValues(t, before+1+4+1, memfabric.LiveRegistrations(), "unregistered on its own worker's 2 NICs")
	require.Equal(t, 3, e.Regions())
	// A write from the cuda:0 group (4 NICs) into host memory (1 NIC):
	// 4 shards, all landing on the host's one NIC.
	hd, _ := h.Descriptor()
	require.Len(t, hd.NICs, 1)
	copy(buf.Bytes(), "ten bytes!")
	xfer := fabric.NewTransfer()
	require.NoError(t, e.SubmitSingle(fabric.SingleWrite{Src: g0, Length: 10, Dst: hd, DstOffset: 4096}, fabric.Notify(xfer)))
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	require.NoError(t, xfer.Wait(wctx))
	require.Equal(t, "ten bytes!", string(buf.Bytes()[4096:4106]))
	require.NoError(t, e.BouncingRecvs(4, 1024, func([]byte) {}, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, e.Close(ctx))
	require.EqualValues(t, before, memfabric.LiveRegistrations(), "every registration released at Close, bouncing buffers included")
}

// A callback that blocks never stalls the workers: the counter path keeps
// completing while the dispatcher is stuck.
func TestSlowCallbackDoesNotBlockWorker(t *testing.T) {
	e := openMem(t, 1)
	buf, err := fabric.AllocHost(1 << 16)
	require.NoError(t, err)
	defer buf.Free()
	src, err := e.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	desc, _ := src.Descriptor()
	release := make(chan struct{})
	var ran atomic.Bool
	defer close(release)
	require.NoError(t, e.SubmitSingle(fabric.SingleWrite{Src: src, Length: 8, Dst: desc},
		fabric.OnDone(func(error) { ran.Store(true); <-release })))
	// Wait until the dispatcher is stuck inside the callback.
	deadline := time.Now().Add(5 * time.Second)
	for !ran.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	require.True(t, ran.Load(), "the callback started")
	tc := new(fabric.TransferCounter)
	for i := 0; i < 5000; i++ {
		require.NoError(t, e.SubmitSingle(fabric.SingleWrite{Src: src, Length: 8, Dst: desc}, fabric.Count(tc)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, tc.Wait(ctx, 5000), "transfers complete while the dispatcher is blocked")
}

// Steady-state submits allocate nothing.
func TestSubmitAllocations(t *testing.T) {
	e := openMem(t, 2)
	buf, err := fabric.AllocHost(1 << 16)
	require.NoError(t, err)
	defer buf.Free()
	src, err := e.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	desc, _ := src.Descriptor()
	tc := new(fabric.TransferCounter)
	idx := []uint32{0, 1, 2, 3, 4, 5, 6, 7}
	paged := fabric.PagedWrite{Src: src, SrcPages: idx, SrcStride: 64, Dst: desc, DstPages: idx, DstStride: 64, Length: 64, Imm: fabric.Immediate(3)}
	var n int64
	ctx := context.Background()
	run := func() {
		if err := e.SubmitPaged(paged, fabric.Count(tc)); err != nil {
			t.Fatal(err)
		}
		n++
		_ = tc.Wait(ctx, n)
	}
	for i := 0; i < 2000; i++ { // warm the pools
		run()
	}
	allocs := testing.AllocsPerRun(2000, run)
	require.LessOrEqual(t, allocs, 0.05, "allocations per paged submit in steady state")
}
