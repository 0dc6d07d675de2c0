package tests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/testutil"
	"github.com/ferryrdma/ferry/ipc"
)

// runIPCTarget opens an ipc engine with two NICs and an 8 MiB
// remote-writable buffer, prints its descriptor and waits to be killed.
func runIPCTarget() error {
	return runKilledTarget(fabric.Config{Transport: "ipc", NICs: 2}, 8<<20)
}

// runKilledTarget opens an engine with cfg and a remote-writable buffer of
// size bytes, prints the buffer's descriptor ("DESC ...") and waits to be
// killed (or for its stdin to close).
func runKilledTarget(cfg fabric.Config, size int) error {
	e, err := fabric.Open(context.Background(), cfg)
	if err != nil {
		return err
	}
	buf, err := fabric.AllocHost(size)
	if err != nil {
		return err
	}
	r, err := e.RegisterHost(buf, fabric.AccessRemoteWrite)
	if err != nil {
		return err
	}
	d, err := r.Descriptor()
	if err != nil {
		return err
	}
	fmt.Printf("DESC %s\n", d)
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed
	return nil
}

// TestIPCTargetKilled: an engine flooding an ipc target that is SIGKILLed
// sees its transfers end (each exactly once, the failed ones with
// fabric.ErrPeerLost), new ones fail the same way and are never posted,
// nothing hangs, both of the target's NIC addresses are declared lost for
// good by the time a failure is reported (though only one NIC's writes may
// have failed), and closing the engine releases every mapping of the dead
// process.
func TestIPCTargetKilled(t *testing.T) {
	cmd := testutil.Spawn(t, "ipc-target", testutil.SpawnOptions{Stdin: true, Lines: true})
	l := cmd.ReadLine(60 * time.Second)
	desc, err := fabric.ParseDescriptor(strings.TrimPrefix(l, "DESC "))
	require.NoError(t, err, "target said %q", l)

	src, err := fabric.AllocHost(8 << 20)
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Free() })
	e, err := fabric.Open(context.Background(), fabric.Config{Transport: "ipc", NICs: 2})
	require.NoError(t, err)
	// Closed however the test ends (before src is freed): an engine left
	// open by a failed run would count in the next run's mappings and
	// registrations.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Close(ctx)
	})
	sr, err := e.RegisterHost(src, fabric.AccessLocal)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	first := fabric.NewTransfer()
	require.NoError(t, e.SubmitSingle(fabric.SingleWrite{Src: sr, Length: 8 << 20, Dst: desc, Imm: fabric.Immediate(1)}, fabric.Notify(first)))
	require.NoError(t, first.Wait(ctx), "the target is alive")
	require.Equal(t, int64(3), ipc.LiveMappings(), "two connection pages and the region, mapped once for both NICs")

	idx := make([]uint32, 1000)
	for i := range idx {
		idx[i] = uint32(i)
	}
	tc := new(fabric.TransferCounter)
	const floods = 200
	for k := 0; k < floods; k++ {
		if k == floods/4 {
			cmd.Kill()
		}
		require.NoError(t, e.SubmitPaged(fabric.PagedWrite{Src: sr, SrcPages: idx, SrcStride: 4096, Dst: desc,
			DstPages: idx, DstStride: 4096, Length: 4096, Imm: fabric.Immediate(2)}, fabric.Count(tc)))
	}
	require.NoError(t, tc.Wait(ctx, floods), "every transfer ends")
	t.Logf("%d of %d floods failed after the kill", tc.Errors(), floods)
	lost := func() bool {
		for _, k := range desc.NICs {
			if !errors.Is(e.PeerStatus(k.Addr), fabric.ErrPeerLost) {
				return false
			}
		}
		return true
	}
	if tc.Errors() > 0 {
		// A failure is reported once its peer was declared lost, and a
		// peer gone for good has the dead process's other NIC address
		// declared with it, though only one NIC's writes may have failed.
		require.True(t, errors.Is(tc.Err(), fabric.ErrPeerLost), "first failure: %v", tc.Err())
		require.True(t, lost(), "the engine declared both of the target's NIC addresses lost")
	}
	_ = cmd.Wait()
	if tc.Errors() == 0 {
		// Every flood ran before an ipc reader saw a connection end; until
		// one does, a write into the dead process's pages can still
		// succeed (see ipc's doc). Once one has, the engine's liveness
		// check finds the target gone within Config.LivenessInterval.
		require.Eventually(t, lost, 10*time.Second, time.Millisecond, "the liveness check declared the target lost")
	}
	late := fabric.NewTransfer()
	require.NoError(t, e.SubmitImm(fabric.ImmWrite{Imm: 3, Dst: desc}, fabric.Notify(late)))
	err = late.Wait(ctx)
	require.ErrorIs(t, err, fabric.ErrPeerLost, "a write to a dead target")
	require.ErrorIs(t, err, fabric.ErrProvider)
	require.True(t, lost(), "the engine declared both of the target's NIC addresses lost")
	// Gone for good: past the retry interval no write is let through.
	time.Sleep(150 * time.Millisecond)
	posted := e.Stats().Domains
	require.NoError(t, e.SubmitImm(fabric.ImmWrite{Imm: 4, Dst: desc}, fabric.Notify(late)))
	require.ErrorIs(t, late.Wait(ctx), fabric.ErrPeerLost)
	for i, d := range e.Stats().Domains {
		require.Equal(t, posted[i].Posted, d.Posted, "a write to the dead target was posted on NIC %d", i)
	}

	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	require.NoError(t, e.Close(cctx))
	require.Zero(t, ipc.LiveMappings(), "mappings of the dead target")
	require.Zero(t, ipc.LiveRegistrations())
}
