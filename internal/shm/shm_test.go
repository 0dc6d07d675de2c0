//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/internal/testutil"
)

// The cross-process test runs this binary again as the receiving peer.
func TestMain(m *testing.M) {
	testutil.Main(m, testutil.Roles{"receiver": receiver})
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// noLeaks fails t if, at its end, more descriptors are open than now.
func noLeaks(t *testing.T) {
	t.Helper()
	// Warm the network poller first: its descriptors live as long as the
	// process and would otherwise count as leaked by the first test.
	a, b := pair(t)
	a.Close()
	b.Close()
	before := openFDs(t)
	t.Cleanup(func() {
		if after := openFDs(t); after > before {
			t.Errorf("%d descriptors open at the end, %d at the start", after, before)
		}
	})
}

// pair returns the two ends of a SOCK_SEQPACKET socketpair.
func pair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fileConn(t, fds[0]), fileConn(t, fds[1])
}

func fileConn(t *testing.T, fd int) *net.UnixConn {
	t.Helper()
	f := os.NewFile(uintptr(fd), "socket")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*net.UnixConn)
}

func TestCreateSeals(t *testing.T) {
	noLeaks(t)
	const size = 3 << 12
	fd, err := Create("ferry-shm-test", size)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, size/2); !errors.Is(err, unix.EPERM) {
		t.Errorf("shrink a sealed file: %v, want EPERM", err)
	}
	if err := unix.Ftruncate(fd, 2*size); !errors.Is(err, unix.EPERM) {
		t.Errorf("grow a sealed file: %v, want EPERM", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_WRITE); !errors.Is(err, unix.EPERM) {
		t.Errorf("add a write seal: %v, want EPERM", err)
	}
	if err := CheckSealed(fd, size); err != nil {
		t.Errorf("check a sealed file of its size: %v", err)
	}
	if err := CheckSealed(fd, size+1); !errors.Is(err, ErrTooSmall) {
		t.Errorf("check for a byte more than the file: %v, want ErrTooSmall", err)
	}
	a, err := Map(fd, 0, size)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Dup(fd)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Map(d, 4096, size-4096)
	unix.Close(d)
	if err != nil {
		t.Fatal(err)
	}
	a[4096+7] = 0x5a
	if b[7] != 0x5a {
		t.Error("two mappings of one file do not share its pages")
	}
	if err := errors.Join(Unmap(a), Unmap(b), Unmap(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := Map(fd, 0, 0); err == nil {
		t.Error("a mapping of no bytes succeeded")
	}
}

// TestCheckSealedRefusesUnsealed: a file a peer could shrink is refused.
func TestCheckSealedRefusesUnsealed(t *testing.T) {
	noLeaks(t)
	fd, err := unix.MemfdCreate("ferry-shm-unsealed", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create: %v", err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, 4096); err != nil {
		t.Fatal(err)
	}
	if err := CheckSealed(fd, 1); !errors.Is(err, ErrNotSealed) {
		t.Fatalf("check an unsealed file: %v, want ErrNotSealed", err)
	}
}

func TestSendReceiveSocketpair(t *testing.T) {
	noLeaks(t)
	a, b := pair(t)
	defer a.Close()
	defer b.Close()
	fd, err := Create("ferry-shm-test", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := Send(ctx, a, []byte("two"), fd, int(w.Fd())); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, fds, err := Receive(ctx, b, buf, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer CloseAll(fds)
	if string(buf[:n]) != "two" || len(fds) != 2 {
		t.Fatalf("received %q and %d files", buf[:n], len(fds))
	}
	// The received descriptors are the same files: a store through the
	// received memfd shows in the sender's mapping, a write into the
	// received pipe comes out of the sender's end.
	if err := CheckSealed(fds[0], 4096); err != nil {
		t.Fatal(err)
	}
	mine, err := Map(fd, 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(mine)
	theirs, err := Map(fds[0], 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(theirs)
	theirs[100] = 77
	if mine[100] != 77 {
		t.Error("the received memory file is not the one sent")
	}
	if _, err := unix.Write(fds[1], []byte{9}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 1)
	if _, err := r.Read(got); err != nil || got[0] != 9 {
		t.Fatalf("read %v %v from the pipe written through the received descriptor", got, err)
	}
	// A message without files passes too.
	if err := Send(ctx, b, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if n, fds, err := Receive(ctx, a, buf, 2); err != nil || n != 1 || len(fds) != 0 {
		t.Fatalf("plain message: %d bytes, %d files, %v", n, len(fds), err)
	}
	if err := Send(ctx, a, nil, fd); err == nil {
		t.Error("a message without bytes was accepted")
	}
}

// TestReceiveRefusesExcess: more descriptors than allowed, or a message
// longer than the buffer, is ErrMalformed and leaves no descriptor open.
func TestReceiveRefusesExcess(t *testing.T) {
	noLeaks(t)
	a, b := pair(t)
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fd, err := Create("ferry-shm-test", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 8)
	for _, tc := range []struct {
		name   string
		msg    []byte
		fds    []int
		maxFDs int
	}{
		{"three files, two allowed", []byte("m"), []int{fd, fd, fd}, 2},
		{"one file, none allowed", []byte("m"), []int{fd}, 0},
		{"longer than the buffer", make([]byte, 9), []int{fd}, 1},
	} {
		if err := Send(ctx, a, tc.msg, tc.fds...); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, fds, err := Receive(ctx, b, buf, tc.maxFDs); !errors.Is(err, ErrMalformed) || fds != nil {
			t.Errorf("%s: %v and %d files, want ErrMalformed and none", tc.name, err, len(fds))
		}
	}
}

// TestReceiveSilentPeer: a peer that never writes makes Receive end with
// the context, by deadline or cancellation, as ErrTimeout; the connection
// stays usable afterwards (no stale deadline).
func TestReceiveSilentPeer(t *testing.T) {
	noLeaks(t)
	a, b := pair(t)
	defer a.Close()
	defer b.Close()
	buf := make([]byte, 8)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := Receive(ctx, b, buf, 1); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("receive past the deadline: %v, want ErrTimeout", err)
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel2)
	if _, _, err := Receive(ctx2, b, buf, 1); !errors.Is(err, ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("receive until cancelled: %v, want ErrTimeout wrapping context.Canceled", err)
	}

	if err := Send(context.Background(), a, []byte("late")); err != nil {
		t.Fatal(err)
	}
	if n, _, err := Receive(context.Background(), b, buf, 1); err != nil || string(buf[:n]) != "late" {
		t.Fatalf("receive after the timeouts: %q %v", buf[:n], err)
	}
}

// TestSendFullSocket: a peer that never reads makes Send end with the
// context once the socket is full.
func TestSendFullSocket(t *testing.T) {
	noLeaks(t)
	a, b := pair(t)
	defer a.Close()
	defer b.Close()
	msg := make([]byte, 4096)
	for i := 0; ; i++ {
		if i == 1<<16 {
			t.Fatal("the socket never filled")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := Send(ctx, a, msg)
		cancel()
		if errors.Is(err, ErrTimeout) {
			return
		}
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

// TestSendAcrossProcesses hands a memory file to another process, which
// writes into it and answers: the store shows here.
func TestSendAcrossProcesses(t *testing.T) {
	noLeaks(t)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine := fileConn(t, fds[0])
	defer mine.Close()
	theirs := os.NewFile(uintptr(fds[1]), "peer socket")
	child := testutil.Spawn(t, "receiver", testutil.SpawnOptions{
		Command: func(name string, args ...string) *exec.Cmd {
			cmd := exec.Command(name, args...)
			cmd.ExtraFiles = []*os.File{theirs} // fd 3 in the child
			return cmd
		},
		Timeout: 2 * time.Minute,
	})
	theirs.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fd, err := Create("ferry-shm-test", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	m, err := Map(fd, 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(m)
	if err := Send(ctx, mine, []byte("map"), fd); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	n, got, err := Receive(ctx, mine, buf, 0)
	if err != nil || string(buf[:n]) != "done" || got != nil {
		t.Fatalf("answer %q, %d files, %v", buf[:n], len(got), err)
	}
	if m[4095] != 0xa5 {
		t.Fatalf("byte %#x at the end of the file, want the receiver's 0xa5", m[4095])
	}
	if err := child.Wait(); err != nil {
		t.Fatalf("receiver: %v", err)
	}
}

// receiver is the peer process of TestSendAcrossProcesses.
func receiver() error {
	f := os.NewFile(3, "peer socket")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return err
	}
	defer c.Close()
	uc := c.(*net.UnixConn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	buf := make([]byte, 8)
	n, fds, err := Receive(ctx, uc, buf, 1)
	if err != nil {
		return err
	}
	defer CloseAll(fds)
	if string(buf[:n]) != "map" || len(fds) != 1 {
		return fmt.Errorf("got %q with %d files", buf[:n], len(fds))
	}
	if err := CheckSealed(fds[0], 4096); err != nil {
		return err
	}
	m, err := Map(fds[0], 0, 4096)
	if err != nil {
		return err
	}
	m[4095] = 0xa5
	if err := Unmap(m); err != nil {
		return err
	}
	return Send(ctx, uc, []byte("done"))
}
