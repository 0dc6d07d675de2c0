package ipc_test

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/testutil"
	"github.com/ferryrdma/ferry/ipc"
)

// Tests across processes: the test binary re-runs itself in a role, and
// the parent kills it with SIGKILL at the interesting moment.

func TestMain(m *testing.M) {
	testutil.Main(m, testutil.Roles{"target": runTarget, "initiator": runInitiator})
}

// runTarget registers a buffer, says where it is, and never polls: the
// parent fills its ring, then kills it.
func runTarget() error {
	d, err := ipc.Open()
	if err != nil {
		return err
	}
	buf, err := fabric.AllocHost(1 << 20)
	if err != nil {
		return err
	}
	k, err := d.RegisterMemory(buf.Span(), rdma.AccessRemoteWrite)
	if err != nil {
		return err
	}
	fmt.Printf("ADDR %s %d\n", d.Address(), k.Remote)
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed
	return nil
}

// runInitiator writes childWrites 64-byte writes with immediates into the
// parent's region, waits for their local completions, says so, and waits
// to be killed.
func runInitiator() error {
	addr, err := rdma.ParseAddress(os.Getenv("FERRY_IPC_PEER"))
	if err != nil {
		return err
	}
	key, err := strconv.ParseUint(os.Getenv("FERRY_IPC_KEY"), 10, 64)
	if err != nil {
		return err
	}
	d, err := ipc.Open()
	if err != nil {
		return err
	}
	buf, err := fabric.AllocHost(childWrites * 64)
	if err != nil {
		return err
	}
	for i := range buf.Bytes() {
		buf.Bytes()[i] = byte(i / 64)
	}
	peer, err := d.ResolvePeer(addr)
	if err != nil {
		return err
	}
	ops := make([]rdma.WriteOp, childWrites)
	for i := range ops {
		ops[i] = rdma.WriteOp{Local: uint64(buf.Addr()) + uint64(i)*64, Length: 64, Remote: uint64(i) * 64,
			RemoteKey: key, Peer: peer, Context: uint64(i), Imm: uint32(i), Flags: rdma.WriteHasImm}
	}
	if _, err := d.PostWrites(ops); err != nil {
		return err
	}
	evs := make([]rdma.Event, 64)
	deadline := time.Now().Add(20 * time.Second)
	for done := 0; done < childWrites; {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d writes completed", done, childWrites)
		}
		n, err := d.Poll(evs)
		if err != nil {
			return err
		}
		for _, ev := range evs[:n] {
			if ev.Errno != 0 {
				return d.DescribeError(ev)
			}
			done++
		}
	}
	fmt.Println("WROTE")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

const childWrites = 1000

// startChild runs the test binary in role and returns its first line.
func startChild(t *testing.T, role string, env ...string) (*testutil.Child, string) {
	c := testutil.Spawn(t, role, testutil.SpawnOptions{Env: env, Stdin: true, Lines: true})
	return c, c.ReadLine(30 * time.Second)
}

// TestTargetProcessDies: writes held for a target whose ring is full fail
// with rdma.ErrPeerLost once it is killed, its mappings are released, and
// later writes and connections to it fail the same way, without hanging.
func TestTargetProcessDies(t *testing.T) {
	cmd, line := startChild(t, "target")
	var hex string
	var key uint64
	_, err := fmt.Sscanf(line, "ADDR %s %d", &hex, &key)
	require.NoError(t, err, "child said %q", line)
	addr, err := rdma.ParseAddress(hex)
	require.NoError(t, err)

	a := openSide(t, 1<<20)
	base := ipc.LiveMappings()
	peer, err := a.d.ResolvePeer(addr)
	require.NoError(t, err)
	const total = 1<<14 + 300
	ops := make([]rdma.WriteOp, total)
	for i := range ops {
		ops[i] = rdma.WriteOp{Local: a.addr(0), Length: 64, Remote: 64, RemoteKey: key, Peer: peer,
			Context: uint64(i), Imm: uint32(i), Flags: rdma.WriteHasImm}
	}
	a.post(ops...)
	pump(t, 20*time.Second, func() bool { return len(a.byCtx) == 1<<14 }, a)
	require.Equal(t, base+2, ipc.LiveMappings(), "the target's page and region are mapped")
	require.NoError(t, a.d.CheckPeer(peer), "alive")

	cmd.Kill()
	pump(t, 20*time.Second, func() bool { return len(a.byCtx) == total }, a)
	failed := 0
	for _, ev := range a.byCtx {
		if ev.Errno != 0 {
			failed++
			err := a.d.DescribeError(ev)
			require.ErrorIs(t, err, rdma.ErrPeerLost)
			require.ErrorIs(t, err, rdma.ErrProvider)
		}
	}
	require.Equal(t, 300, failed, "every held write failed, once")
	require.ErrorIs(t, a.d.CheckPeer(peer), rdma.ErrPeerLost)
	// The reader goroutine unmaps the regions and the worker the page as
	// soon as they see the connection end, not necessarily before the
	// writes failed.
	pump(t, 5*time.Second, func() bool { return ipc.LiveMappings() == base }, a)

	a.post(rdma.WriteOp{Local: a.addr(0), Length: 8, RemoteKey: key, Peer: peer, Context: total})
	pump(t, 5*time.Second, func() bool { return len(a.byCtx) == total+1 }, a)
	require.ErrorIs(t, a.d.DescribeError(a.byCtx[total]), rdma.ErrPeerLost)
	// Once the process is reaped its listening socket is gone too (its
	// descriptors close one by one as it exits, so not necessarily before
	// the connection's).
	_ = cmd.Wait()
	d2, err := ipc.Open()
	require.NoError(t, err)
	defer d2.Close()
	_, err = d2.ResolvePeer(addr)
	require.ErrorIs(t, err, rdma.ErrPeerLost)
}

// TestInitiatorProcessDies: a target that polls only after its initiator
// was killed still gets every immediate the initiator published, the
// bytes are there, and the connection's page is then unmapped.
func TestInitiatorProcessDies(t *testing.T) {
	b := openSide(t, childWrites*64)
	maps := ipcMaps(t)
	cmd, line := startChild(t, "initiator", "FERRY_IPC_PEER="+b.d.Address().String(),
		"FERRY_IPC_KEY="+strconv.FormatUint(b.keys.Remote, 10))
	require.Equal(t, "WROTE", strings.TrimSpace(line))
	require.Equal(t, maps+1, ipcMaps(t), "the connection page is mapped")
	cmd.Kill()
	_ = cmd.Wait()
	pump(t, 20*time.Second, func() bool { return len(b.imms) == childWrites && ipcMaps(t) == maps }, b)
	for i, v := range b.imms {
		require.EqualValues(t, i, v)
	}
	for i, c := range b.buf.Bytes() {
		if c != byte(i/64) {
			t.Fatalf("byte %d is %d, want %d", i, c, byte(i/64))
		}
	}
}
