package cuda

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// connPair returns the two ends of a SocketPair, closed at the test's end.
func connPair(t *testing.T) (a, b *net.UnixConn) {
	t.Helper()
	a, bf, err := SocketPair()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err = UnixConnFromFile(bf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b
}

func TestSendReceiveFD(t *testing.T) {
	a, b := connPair(t)

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	hdr := encodeMemoryHeader(2<<20, 3)
	if err := SendFD(a, int(w.Fd()), hdr); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fd, n, err := ReceiveFD(ctx, b, buf)
	if err != nil {
		t.Fatal(err)
	}
	// The received fd is a working duplicate of the pipe's write end.
	got := os.NewFile(uintptr(fd), "received")
	if _, err := got.Write([]byte("x")); err != nil {
		t.Fatalf("write through received fd: %v", err)
	}
	got.Close()
	one := make([]byte, 1)
	if _, err := r.Read(one); err != nil || one[0] != 'x' {
		t.Fatalf("read: %v %q", err, one)
	}
	size, ord, err := decodeMemoryHeader(buf[:n])
	if err != nil || size != 2<<20 || ord != 3 {
		t.Fatalf("header: %d %d %v", size, ord, err)
	}
	if _, _, err := decodeMemoryHeader(buf[:n-1]); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("short header: %v", err)
	}
}

func TestReceiveFDContext(t *testing.T) {
	a, b := connPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start := time.Now()
	_, _, err := ReceiveFD(ctx, b, make([]byte, 8))
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("cancel did not interrupt the read")
	}
	// A message without an fd is refused (and the conn still works).
	if _, err := a.Write([]byte("no fd")); err != nil {
		t.Fatal(err)
	}
	_, _, err = ReceiveFD(context.Background(), b, make([]byte, 8))
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("message without fd: %v", err)
	}
	if err := SendFD(a, -1, []byte{1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad fd: %v", err)
	}
	if err := SendFD(a, 0, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty payload: %v", err)
	}
	_ = syscall.Getpid()
}
