package fabrictest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// peersOf sums the peer addresses resolved on e's NICs.
func peersOf(e *fabric.Engine) (n int64) {
	for _, d := range e.Stats().Domains {
		n += d.Peers
	}
	return n
}

// testConnect: Connect resolves the target's NICs on every NIC of the
// writer, twice without effect; the first write after it sets nothing up;
// a connect to an engine that closed fails in time with ErrPeerLost.
func testConnect(t *testing.T, p Params) {
	if p.Transport == "verbs" && p.NICs > 1 {
		// Connect resolves every target NIC on every writer NIC.
		t.Skip("connect over verbs needs every NIC to reach every other; the test VM's rxe0 and " +
			"rxe1 sit on separate dummy links that carry no traffic between them")
	}
	env := NewEnv(t, p)
	var addrs []fabric.Address
	for _, k := range env.Desc.NICs {
		addrs = append(addrs, k.Addr)
	}
	require.Zero(t, peersOf(env.A), "nothing resolved before Connect")
	require.NoError(t, env.A.Connect(Ctx(t), addrs...))
	nics := int64(len(env.A.Stats().Domains))
	want := nics * int64(len(addrs))
	require.Equal(t, want, peersOf(env.A), "every target NIC resolved on every writer NIC")
	require.NoError(t, env.A.Connect(Ctx(t), addrs...), "connect is idempotent")
	require.Equal(t, want, peersOf(env.A))

	// The bytes are checked once the target counted the writes'
	// immediates (one each, pinned to one NIC): the writer's completion
	// alone does not say they landed (tcp).
	ctr, err := env.B.ImmCounter(0x6c)
	require.NoError(t, err)
	for i := range 8 {
		require.NoError(t, Wait(t, func(c fabric.Completion) error {
			return env.A.SubmitSingle(fabric.SingleWrite{Src: env.SrcReg, SrcOffset: uint64(i) * 4096,
				Dst: env.Desc, DstOffset: uint64(i) * 4096, Length: 4096, Imm: fabric.Immediate(0x6c),
				Route: fabric.Pinned(i % len(env.Desc.NICs))}, c)
		}))
	}
	require.NoError(t, ctr.Wait(Ctx(t), 8))
	require.Equal(t, want, peersOf(env.A), "writes after Connect resolve nothing new")
	require.Equal(t, env.Src.Bytes()[:8*4096], env.Dst.Bytes()[:8*4096])
	require.NoError(t, env.A.PeerStatus(env.B.MainAddress()))

	// An engine that closed: its address answers no more.
	c := OpenEngine(t, p)
	dead := c.MainAddress()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	require.NoError(t, c.Close(ctx))
	// mem, ipc and shm know at once that the peer is gone from the
	// endpoint's name, tcp;ofi_rxm from the incarnation question nobody
	// answers any more at that address (when the refusal of that question
	// is lost, only the handshake timeout shows it, past a short
	// deadline). verbs learns it only when its connection handshake times
	// out (10 s by default), so there a short deadline ends Connect with
	// ErrTimeout.
	limit, wantErr := 10*time.Second, fabric.ErrPeerLost
	switch p.Transport {
	case "verbs":
		limit, wantErr = time.Second, fabric.ErrTimeout
	case "tcp;ofi_rxm":
		limit = 2 * time.Second
	}
	cctx, ccancel := context.WithTimeout(context.Background(), limit)
	defer ccancel()
	t0 := time.Now()
	err = env.A.Connect(cctx, dead)
	if p.Transport == "tcp;ofi_rxm" && errors.Is(err, fabric.ErrTimeout) {
		wantErr = fabric.ErrTimeout
	}
	require.ErrorIs(t, err, wantErr, "connect to a closed engine: %v", err)
	require.NotErrorIs(t, err, fabric.ErrInvalidArgument, "the peer is gone, the argument is fine")
	require.Less(t, time.Since(t0), limit+5*time.Second, "connect ends by its deadline")
	// The live peer is unaffected.
	require.NoError(t, env.A.Connect(Ctx(t), addrs...))

	require.ErrorIs(t, env.A.Connect(Ctx(t), fabric.Address{}), fabric.ErrInvalidArgument)
}
