package cuda

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/ferryrdma/ferry/internal/shm"
)

// File descriptors between processes. A unix socket carries the fd with
// SCM_RIGHTS (internal/shm), which needs no capability (pidfd_getfd needs
// ptrace rights over the exporter). This file is pure Go and works
// without a driver.

// SendFD sends fd and payload (at least one byte; a message without data
// may be dropped by the receiver's read) in one message. The caller keeps
// its fd: the receiver gets a duplicate.
func SendFD(conn *net.UnixConn, fd int, payload []byte) error {
	if conn == nil || fd < 0 || len(payload) == 0 {
		return invalid("send fd", "conn %v fd %d payload %d bytes", conn != nil, fd, len(payload))
	}
	if err := shm.Send(context.Background(), conn, payload, fd); err != nil {
		return fmt.Errorf("cuda: %w", err)
	}
	return nil
}

// ReceiveFD reads one message sent by SendFD into buf and returns the fd
// it carried (the caller owns it) and the payload length. It returns when
// a message arrives, the connection fails, or ctx ends (the error then
// wraps ErrTimeout and ctx.Err()).
func ReceiveFD(ctx context.Context, conn *net.UnixConn, buf []byte) (fd, n int, err error) {
	if conn == nil || len(buf) == 0 {
		return -1, 0, invalid("receive fd", "nil conn or empty buffer")
	}
	n, fds, err := shm.Receive(ctx, conn, buf, 1)
	switch {
	case errors.Is(err, shm.ErrTimeout):
		return -1, 0, fmt.Errorf("cuda: receive fd: %w (%w)", ErrTimeout, err)
	case errors.Is(err, shm.ErrMalformed):
		return -1, 0, fmt.Errorf("cuda: %w: %w", err, ErrInvalidArgument)
	case err != nil:
		return -1, 0, fmt.Errorf("cuda: %w", err)
	case len(fds) != 1:
		shm.CloseAll(fds)
		return -1, 0, fmt.Errorf("cuda: receive fd: want one fd, got %d: %w", len(fds), ErrInvalidArgument)
	}
	return fds[0], n, nil
}

// memoryHeader travels with an exported VMM allocation.
const (
	memoryMagic      = 0x4d594546 // "FEYM"
	memoryHeaderSize = 24
)

func encodeMemoryHeader(size uint64, ordinal int) []byte {
	b := make([]byte, memoryHeaderSize)
	binary.LittleEndian.PutUint32(b[0:], memoryMagic)
	binary.LittleEndian.PutUint32(b[4:], 1) // version
	binary.LittleEndian.PutUint64(b[8:], size)
	binary.LittleEndian.PutUint32(b[16:], uint32(int32(ordinal)))
	return b
}

func decodeMemoryHeader(b []byte) (size uint64, ordinal int, err error) {
	if len(b) != memoryHeaderSize || binary.LittleEndian.Uint32(b[0:]) != memoryMagic ||
		binary.LittleEndian.Uint32(b[4:]) != 1 {
		return 0, 0, fmt.Errorf("cuda: memory header (%d bytes): %w", len(b), ErrInvalidArgument)
	}
	return binary.LittleEndian.Uint64(b[8:]), int(int32(binary.LittleEndian.Uint32(b[16:]))), nil
}

// SendMemory exports m (AllocVMM with Exportable) and sends it on conn.
func SendMemory(conn *net.UnixConn, m *DeviceMemory) error {
	fd, err := m.ExportFD()
	if err != nil {
		return err
	}
	defer closeFD(fd)
	return SendFD(conn, fd, encodeMemoryHeader(m.Size(), m.ctx.dev.ordinal))
}

// ReceiveMemory receives an allocation sent by SendMemory and maps it into
// c. The result is closed like any DeviceMemory; the exporter's memory
// stays alive until both sides closed it.
func ReceiveMemory(ctx context.Context, conn *net.UnixConn, c *Context) (*DeviceMemory, error) {
	if _, err := c.use("receive memory"); err != nil {
		return nil, err
	}
	buf := make([]byte, 64)
	fd, n, err := ReceiveFD(ctx, conn, buf)
	if err != nil {
		return nil, err
	}
	defer closeFD(fd)
	size, _, err := decodeMemoryHeader(buf[:n])
	if err != nil {
		return nil, err
	}
	return c.ImportVMM(fd, size)
}

// SocketPair returns two connected unix sockets, for a parent and the
// child it starts (pass the second as an ExtraFiles entry).
func SocketPair() (*net.UnixConn, *os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("cuda: socketpair: %w", err)
	}
	local := os.NewFile(uintptr(fds[0]), "ferry-ipc-local")
	defer local.Close()
	c, err := net.FileConn(local)
	if err != nil {
		syscall.Close(fds[1])
		return nil, nil, fmt.Errorf("cuda: socketpair: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		syscall.Close(fds[1])
		return nil, nil, errors.New("cuda: socketpair: not a unix conn")
	}
	return uc, os.NewFile(uintptr(fds[1]), "ferry-ipc-remote"), nil
}

// UnixConnFromFile turns an inherited socket (see SocketPair) into a conn.
// The file is closed.
func UnixConnFromFile(f *os.File) (*net.UnixConn, error) {
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("cuda: socket from file: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, invalid("socket from file", "not a unix socket")
	}
	return uc, nil
}
