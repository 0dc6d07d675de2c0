package fabric_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/fabric"
)

// TestHostMemoryFile: a HostBuffer's file maps the same pages in a second
// mapping, is sealed against resizing, covers only ranges inside one live
// buffer, and is gone after Free.
func TestHostMemoryFile(t *testing.T) {
	const size = 3*4096 + 100
	h, err := fabric.AllocHost(size)
	require.NoError(t, err)
	if !h.Shareable() {
		t.Skip("memfd_create refused here: host memory is anonymous")
	}
	defer h.Free()
	other, err := fabric.AllocHost(4096)
	require.NoError(t, err)
	defer other.Free()

	f, err := fabric.HostMemoryFile(h.Addr()+4096, 100)
	require.NoError(t, err)
	defer unix.Close(f.FD)
	require.EqualValues(t, 4096, f.Offset)
	require.EqualValues(t, size, f.Size)
	m, err := unix.Mmap(f.FD, 0, int(f.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(m)
	m[4096+7] = 42
	require.EqualValues(t, 42, h.Bytes()[4096+7], "the file maps the buffer's pages")
	h.Bytes()[size-1] = 9
	require.EqualValues(t, 9, m[size-1])
	require.Error(t, unix.Ftruncate(f.FD, 4096), "sealed against shrinking")
	require.Error(t, unix.Ftruncate(f.FD, 1<<30), "sealed against growing")
	seals, err := unix.FcntlInt(uintptr(f.FD), unix.F_GET_SEALS, 0)
	require.NoError(t, err)
	require.NotZero(t, seals&unix.F_SEAL_SHRINK)

	for name, r := range map[string][2]uint64{
		"before":        {uint64(h.Addr()) - 1, 2},
		"past the end":  {uint64(h.Addr()) + 4*4096 - 10, 11},
		"across":        {uint64(h.Addr()), 1 << 40},
		"outside":       {1 << 20, 4096},
		"whole but one": {uint64(h.Addr()), 4*4096 + 1},
	} {
		_, err := fabric.HostMemoryFile(uintptr(r[0]), r[1])
		require.ErrorIs(t, err, fabric.ErrNotSupported, name)
	}
	_, err = fabric.HostMemoryFile(h.Addr(), 0)
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)
	g, err := fabric.HostMemoryFile(other.Addr(), 4096)
	require.NoError(t, err)
	require.NoError(t, unix.Close(g.FD))
	require.EqualValues(t, 0, g.Offset)

	addr := other.Addr()
	require.NoError(t, other.Free())
	_, err = fabric.HostMemoryFile(addr, 1)
	require.ErrorIs(t, err, fabric.ErrNotSupported, "freed buffers are forgotten")
}

// TestMapHostFile: a caller's sealed memfd becomes a shareable HostBuffer
// holding its own descriptor; unsealed files and short files are refused.
func TestMapHostFile(t *testing.T) {
	fd, err := unix.MemfdCreate("test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Skipf("memfd_create: %v", err)
	}
	defer unix.Close(fd)
	require.NoError(t, unix.Ftruncate(fd, 10000))
	_, err = fabric.MapHostFile(fd, 10000)
	require.ErrorIs(t, err, fabric.ErrInvalidArgument, "not sealed")
	_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK)
	require.NoError(t, err)
	_, err = fabric.MapHostFile(fd, 10001)
	require.ErrorIs(t, err, fabric.ErrInvalidArgument, "longer than the file")
	_, err = fabric.MapHostFile(-1, 1)
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)

	h, err := fabric.MapHostFile(fd, 10000)
	require.NoError(t, err)
	require.True(t, h.Shareable())
	require.Equal(t, 10000, h.Len())
	h.Bytes()[9999] = 5
	f, err := fabric.HostMemoryFile(h.Addr()+9000, 1000)
	require.NoError(t, err)
	require.EqualValues(t, 9000, f.Offset)
	require.EqualValues(t, 10000, f.Size)
	var b [1]byte
	_, err = unix.Pread(f.FD, b[:], 9999)
	require.NoError(t, err)
	require.EqualValues(t, 5, b[0], "the caller's file backs the buffer")
	require.NoError(t, unix.Close(f.FD))
	require.NoError(t, h.Free())
	_, err = unix.Pread(fd, b[:], 9999)
	require.NoError(t, err, "the caller's descriptor is still its own")
}
