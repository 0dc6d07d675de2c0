//go:build cgo

package efa

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"golang.org/x/sys/unix"
)

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestReapDeadShm: region files of ferry endpoints whose process is gone
// and whose lock is free are removed; a live pid's, a locked one's (a
// process in another pid namespace) and other programs' files stay.
func TestReapDeadShm(t *testing.T) {
	dir := t.TempDir() + "/"
	dead := deadPID(t)
	names := map[string]bool{ // name -> reaped
		"ferry-" + strconv.Itoa(dead) + "-00c0ffee-1-1":        true,
		"ferry-" + strconv.Itoa(os.Getpid()) + "-0badf00d-1-1": false,
		"ferry-" + strconv.Itoa(dead) + "-0000beef-2-7":        false, // locked below
		"ferry-notapid-1-1":           false,
		"other-" + strconv.Itoa(dead): false,
	}
	for n := range names {
		if err := os.WriteFile(dir+n, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := os.Open(dir + "ferry-" + strconv.Itoa(dead) + "-0000beef-2-7")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	got := reapDeadShm(dir)
	var want []string
	for n, reaped := range names {
		if reaped {
			want = append(want, n)
		}
		_, err := os.Stat(dir + n)
		if exists := err == nil; exists == reaped {
			t.Errorf("%s: exists %v after reaping, want %v", n, exists, !reaped)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("reaped %v, want %v", got, want)
	}
}

// TestCheckPeerShm: a live shm peer passes the check; one whose process
// is gone, and one whose region file is gone, are lost.
func TestCheckPeerShm(t *testing.T) {
	a := openTest(t, testTransport{name: "shm"})
	b := openTest(t, testTransport{name: "shm"})
	live, err := a.ResolvePeer(b.Address())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CheckPeer(live); err != nil {
		t.Fatalf("live peer: %v", err)
	}
	if b.shmLock == nil {
		t.Fatal("an open shm endpoint holds no lock on its region file")
	}
	// A region file left by a process that was killed.
	name := "ferry-" + strconv.Itoa(deadPID(t)) + "-dead0001-1-1"
	if err := os.WriteFile(filepath.Join("/dev/shm", name), []byte("region"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(filepath.Join("/dev/shm", name))
	addr, err := rdma.AddressFromRaw(append([]byte(name), 0))
	if err != nil {
		t.Fatal(err)
	}
	dead, err := a.ResolvePeer(addr)
	if err != nil {
		t.Fatal(err)
	}
	err = a.CheckPeer(dead)
	if !errors.Is(err, rdma.ErrPeerLost) {
		t.Fatalf("peer of a dead process: %v", err)
	}
	t.Log(err)
	if err := os.Remove(filepath.Join("/dev/shm", name)); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckPeer(dead); !errors.Is(err, rdma.ErrPeerLost) {
		t.Fatalf("peer whose region file is gone: %v", err)
	}
	// tcp has no such check but a heartbeat.
	tc := openTest(t, testTransport{name: "tcp;ofi_rxm", node: "127.0.0.1"})
	if _, ok := tc.ProbeOp(0); !ok {
		t.Error("tcp has no heartbeat")
	}
	if _, ok := a.ProbeOp(live); ok {
		t.Error("shm offers a heartbeat it does not need")
	}
}

// TestDeadShmPeerNotPosted: once the process behind a shm peer exits, the
// next batch refuses the ops to it before calling into libfabric, with an
// error wrapping rdma.ErrPeerLost, and posts the ops before them.
func TestDeadShmPeerNotPosted(t *testing.T) {
	a := openTest(t, testTransport{name: "shm"})
	// A stand-in peer: a region file named after a process this test
	// controls. Nothing may be posted to it (it is no shm region).
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	name := "ferry-" + strconv.Itoa(child.Process.Pid) + "-dead0002-1-1"
	path := filepath.Join("/dev/shm", name)
	if err := os.WriteFile(path, []byte("region"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(path)
	addr, err := rdma.AddressFromRaw(append([]byte(name), 0))
	if err != nil {
		t.Fatal(err)
	}
	peer, err := a.ResolvePeer(addr)
	if err != nil {
		t.Fatal(err)
	}
	if a.watch == nil {
		t.Fatal("no watcher for a shm peer whose name carries a pid")
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for a.watch.events.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the peer's exit was not seen in 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ops := []rdma.WriteOp{{Peer: peer, Length: 8}, {Peer: peer, Length: 8}}
	n, err := a.PostWrites(ops)
	if n != 0 || !errors.Is(err, rdma.ErrPeerLost) {
		t.Fatalf("post to a dead peer: %d accepted, %v; want 0 and ErrPeerLost", n, err)
	}
	t.Log(err)
	sn, err := a.PostSends([]rdma.SendOp{{Peer: peer, Length: 8}})
	if sn != 0 || !errors.Is(err, rdma.ErrPeerLost) {
		t.Fatalf("send to a dead peer: %d accepted, %v; want 0 and ErrPeerLost", sn, err)
	}
}

// TestShmNoOpErrorText: an shm error completion that names no operation
// says what it can mean, since the write it belonged to never completes.
func TestShmNoOpErrorText(t *testing.T) {
	a := openTest(t, testTransport{name: "shm"})
	err := a.DescribeError(rdma.Event{Errno: int32(unix.EIO)})
	if !errors.Is(err, rdma.ErrProvider) || !strings.Contains(err.Error(), "names no operation") {
		t.Fatalf("no-operation error: %v", err)
	}
	t.Log(err)
	err = a.DescribeError(rdma.Event{Errno: int32(unix.EIO), Context: 7, Kind: rdma.EventWrite})
	if strings.Contains(err.Error(), "names no operation") {
		t.Fatalf("an error naming its operation: %v", err)
	}
}
