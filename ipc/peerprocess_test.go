package ipc

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// startTarget runs the test binary as a target process (see runTarget in
// process_test.go) and returns it with the address it prints.
func startTarget(t *testing.T) (*testutil.Child, rdma.Address) {
	cmd := testutil.Spawn(t, "target", testutil.SpawnOptions{Stdin: true, Lines: true})
	l := cmd.ReadLine(30 * time.Second)
	var hex string
	var key uint64
	_, err := fmt.Sscanf(l, "ADDR %s %d", &hex, &key)
	require.NoError(t, err, "target said %q", l)
	addr, err := rdma.ParseAddress(hex)
	require.NoError(t, err)
	return cmd, addr
}

// waitFor polls d until cond holds, failing after timeout.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool, ds ...*Domain) {
	t.Helper()
	evs := make([]rdma.Event, 16)
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not reached within %v", timeout)
		}
		for _, d := range ds {
			_, err := d.Poll(evs)
			require.NoError(t, err)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestProcessEndMarksEveryConnection: two endpoints of this process are
// connected to one target process, which is killed. The reader of the
// second connection is held back when it sees its connection end, yet the
// second endpoint finds the peer dead as soon as the first does, and a
// write through it fails as the peer's: the first reader to see the end
// of a process marks all this process's connections to it dead, before
// its own.
func TestProcessEndMarksEveryConnection(t *testing.T) {
	cmd, addr := startTarget(t)
	a, err := Open()
	require.NoError(t, err)
	defer a.Close()
	b, err := Open()
	require.NoError(t, err)
	defer b.Close()
	pa, err := a.ResolvePeer(addr)
	require.NoError(t, err)
	pb, err := b.ResolvePeer(addr)
	require.NoError(t, err)
	waitFor(t, 10*time.Second, func() bool {
		return a.peers[pa].state.Load() == peerReady && b.peers[pb].state.Load() == peerReady
	}, a, b)
	require.Equal(t, cmd.Pid(), b.peers[pb].pid, "the pid the kernel gives for the target")

	release := make(chan struct{})
	held := make(chan struct{})
	hook := func(p *outPeer) {
		if p.d == b {
			close(held)
			<-release
		}
	}
	readerEndHook.Store(&hook)
	t.Cleanup(func() { readerEndHook.Store(nil) })
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	cmd.Kill()
	waitFor(t, 10*time.Second, func() bool { return a.CheckPeer(pa) != nil }, a)
	err = b.CheckPeer(pb)
	require.ErrorIs(t, err, rdma.ErrPeerLost, "the second endpoint's peer, its reader held back")
	require.ErrorIs(t, err, rdma.ErrProvider)
	require.Contains(t, err.Error(), "process exited")

	n, err := b.PostWrites([]rdma.WriteOp{{Peer: pb, Context: 7, Imm: 1, Flags: rdma.WriteHasImm}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	evs := make([]rdma.Event, 4)
	n, err = b.Poll(evs)
	require.NoError(t, err)
	require.Equal(t, 1, n, "completed at once")
	require.Equal(t, uint64(7), evs[0].Context)
	require.ErrorIs(t, b.DescribeError(evs[0]), rdma.ErrPeerLost, "not carried into the dead process's ring")

	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the second reader never saw its connection end")
	}
	close(release)
	released = true
}

// TestProcessExiting: a live process is not exiting; a killed one is,
// before and after it is reaped, and so is a pid no process has.
func TestProcessExiting(t *testing.T) {
	require.False(t, processExiting(os.Getpid()))
	cmd, _ := startTarget(t)
	pid := cmd.Pid()
	require.False(t, processExiting(pid), "alive")
	cmd.Kill()
	deadline := time.Now().Add(10 * time.Second)
	for !processExiting(pid) {
		require.True(t, time.Now().Before(deadline), "killed process %d never seen exiting", pid)
		time.Sleep(time.Millisecond)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		t.Logf("killed, not reaped: %s", b)
	}
	_ = cmd.Wait()
	require.True(t, processExiting(pid), "reaped")
	require.True(t, processExiting(1<<30), "no such process (pid_max is at most 1<<22)")
}
