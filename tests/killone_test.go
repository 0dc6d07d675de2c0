package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// A dead peer costs only its own transfers: one writer floods two target
// processes; one is SIGKILLed. Its transfers must end with a PeerError
// naming it within the liveness deadline, and the writes to the survivor
// go on without a single error, its bytes verified at the end
// (killOneUnderFlood).

func TestKillOneOfTwoTargets(t *testing.T) {
	for _, tr := range []struct{ transport, node string }{{"ipc", ""}, {"tcp;ofi_rxm", "127.0.0.1"}, {"shm", ""}} {
		t.Run(tr.transport, func(t *testing.T) {
			killOneOfTwo(t, params{transport: tr.transport, node: tr.node, nics: 1})
		})
	}
}

func killOneOfTwo(t *testing.T, p params) {
	e, src, sr := openFlooder(t, p)
	for i, b := 0, src.Bytes(); i < len(b); i++ {
		b[i] = pattern(7, i)
	}
	victim, survivor := startTarget(t, p, false), startTarget(t, p, false)
	const chunk = 64 << 10
	killOneUnderFlood(t, p.transport, "write", victim, survivor, 128, func(tg *target) submitFunc {
		return writeChunks(e, sr, tg.desc, chunk)
	})

	// Verify the survivor's bytes: one last write of the whole buffer,
	// then the target checks every byte.
	tr := fabric.NewTransfer()
	require.NoError(t, e.SubmitSingle(fabric.SingleWrite{Src: sr, Length: unregBuf, Dst: survivor.desc}, fabric.Notify(tr)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, tr.Wait(ctx))
	_, err := fmt.Fprintln(survivor.stdin, "check 7")
	require.NoError(t, err)
	require.Equal(t, "ok", survivor.next(t, "CHECK "))
	survivor.quit(t)
}
