package ipc_test

import (
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func readable(t *testing.T, fd int, wait time.Duration) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(wait.Milliseconds()))
	require.NoError(t, err)
	return n > 0
}

// TestSleeperWakes: a target armed for sleep is woken through its eventfd
// by the first immediate and by the first message; it refuses to sleep
// while immediates wait; Awake clears the eventfd.
func TestSleeperWakes(t *testing.T) {
	a, b := openSide(t, 1<<20), openSide(t, 1<<20)
	peer := a.resolve(b)
	a.post(a.write(peer, b, 0, 8, 1, 11))
	pump(t, 10*time.Second, func() bool { return len(b.imms) == 1 && len(a.byCtx) == 1 }, a, b)
	b.d.Awake() // forget the set-up signals (new connection)
	require.False(t, readable(t, b.d.WakeFD(), 0))

	require.True(t, b.d.PrepareSleep(), "nothing waits")
	a.post(a.write(peer, b, 0, 8, 2, 12))
	require.True(t, readable(t, b.d.WakeFD(), 5*time.Second), "the immediate wakes the sleeper")
	b.d.Awake()
	require.False(t, readable(t, b.d.WakeFD(), 0), "Awake clears the eventfd")
	require.False(t, b.d.PrepareSleep(), "an immediate waits: no sleep")
	pump(t, 10*time.Second, func() bool { return len(b.imms) == 2 }, b)

	require.True(t, b.d.PrepareSleep())
	a.post(rdma.WriteOp{Peer: peer, Context: 3}) // no immediate: nothing to wake for
	pump(t, 10*time.Second, func() bool { return len(a.byCtx) == 3 }, a)
	require.False(t, readable(t, b.d.WakeFD(), 20*time.Millisecond))
	b.d.Awake()

	_, err := b.d.PostRecvs([]rdma.RecvOp{{Local: b.addr(0), Length: 64, Context: 9}})
	require.NoError(t, err)
	require.True(t, b.d.PrepareSleep())
	n, err := a.d.PostSends([]rdma.SendOp{{Local: a.addr(0), Length: 5, Peer: peer, Context: 4}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.True(t, readable(t, b.d.WakeFD(), 5*time.Second), "a message wakes the sleeper")
	b.d.Awake()
	pump(t, 10*time.Second, func() bool { return len(b.recvs) == 1 }, a, b)
}
