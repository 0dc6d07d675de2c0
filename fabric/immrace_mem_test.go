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

// TestImmCounterRegisteredMidPass pins down the interleaving that once
// lost immediates: within one poll pass over two NICs, the target's worker
// reads the counter map for an immediate on NIC 0; then a counter is
// registered and its immediate sent to NIC 1 before the worker polls NIC 1.
// That immediate must be counted (it was sent after its counter existed),
// not classified against the map the worker read earlier in the pass.
func TestImmCounterRegisteredMidPass(t *testing.T) {
	a, b := openMem(t, 2), openMem(t, 2)
	dst, err := fabric.AllocHost(4096)
	require.NoError(t, err)
	defer dst.Free()
	dr, err := b.RegisterHost(dst, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	desc, err := dr.Descriptor()
	require.NoError(t, err)
	defer b.Unregister(dr)

	bg, err := b.ImmCounter(0xB0)
	require.NoError(t, err)

	sendImm := func(imm uint32, nic int) error {
		tr := fabric.NewTransfer()
		if err := a.SubmitImm(fabric.ImmWrite{Imm: imm, Dst: desc, Route: fabric.Pinned(nic)}, fabric.Notify(tr)); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return tr.Wait(ctx) // the mem provider delivers at post time
	}

	var (
		start = make(chan struct{})
		armed atomic.Bool
		ctr   atomic.Pointer[fabric.ImmCounter]
		acted = make(chan error, 2)
	)
	// Both hooks run on the target's worker. NIC 0's, once started, queues
	// an immediate on NIC 0 that this very poll returns (so the worker
	// reads the counter map in this pass); NIC 1's, in the same pass,
	// registers a counter and queues its immediate on NIC 1.
	require.NoError(t, memfabric.Inject(desc.NICs[0].Addr, memfabric.Faults{BeforePoll: func() {
		select {
		case <-start:
		default:
			return
		}
		if armed.Load() || ctr.Load() != nil {
			return
		}
		if err := sendImm(0xB0, 0); err != nil {
			acted <- err
			return
		}
		armed.Store(true)
	}}))
	require.NoError(t, memfabric.Inject(desc.NICs[1].Addr, memfabric.Faults{BeforePoll: func() {
		if !armed.CompareAndSwap(true, false) {
			return
		}
		c, err := b.ImmCounter(0x77)
		if err == nil {
			ctr.Store(c)
			err = sendImm(0x77, 1)
		}
		acted <- err
	}}))
	close(start)
	select {
	case err := <-acted:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the target's worker never polled NIC 1 after NIC 0")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	require.NoError(t, bg.Wait(ctx, 1))
	require.NoError(t, ctr.Load().Wait(ctx, 1), "immediate sent after its counter was registered was not counted (unclaimed %d)", b.Stats().Unclaimed)
	require.Zero(t, b.Stats().Unclaimed)
}

// TestCounterWaitArguments: a negative credit wait would fabricate credits
// and an empty flag arm would raise the flag for nothing; both are refused.
func TestCounterWaitArguments(t *testing.T) {
	e := openMem(t, 1)
	c, err := e.ImmCounter(5)
	require.NoError(t, err)
	require.ErrorIs(t, c.Wait(context.Background(), -1), fabric.ErrInvalidArgument)
	require.NoError(t, c.Wait(context.Background(), 0))
	require.EqualValues(t, 0, c.Count())
	var f fabric.HostFlag
	fc, err := e.FlagCounter(6, &f)
	require.NoError(t, err)
	require.ErrorIs(t, fc.Wait(0), fabric.ErrInvalidArgument)
	require.ErrorIs(t, fc.Wait(-2), fabric.ErrInvalidArgument)
	require.False(t, f.IsSet())
}
