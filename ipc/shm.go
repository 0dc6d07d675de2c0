package ipc

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"golang.org/x/sys/unix"
)

// Shared memory: every mapping this package makes goes through mapFile and
// unmap, so the live count is exact (tests check it returns to zero).
var liveMaps atomic.Int64

// newMemfd returns a sealed memfd of size bytes (pages are allocated only
// when touched).
func newMemfd(name string, size int) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_NOEXEC_SEAL)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("size memfd: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("seal memfd: %w", err)
	}
	return fd, nil
}

// mapFile maps [off, off+n) of fd shared and writable. A file received
// from a peer (need > 0) must be sealed against shrinking and at least
// need bytes long (the end of what will be accessed; the mapping's last
// page may reach past the end of the file): otherwise the peer could
// truncate it under the mapping and turn our stores into SIGBUS.
func mapFile(fd int, off, n, need uint64) ([]byte, error) {
	if n == 0 || off+n < off || n > 1<<47 {
		return nil, fmt.Errorf("map [%d, +%d): %w", off, n, rdma.ErrInvalidArgument)
	}
	if need > 0 {
		seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
		if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
			return nil, fmt.Errorf("peer memory file is not sealed against shrinking (seals %#x, %v): %w", seals, err, rdma.ErrNotSupported)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, fmt.Errorf("stat peer memory file: %w", err)
		}
		if st.Size < 0 || uint64(st.Size) < need || need > off+n {
			return nil, fmt.Errorf("peer memory file of %d bytes, mapping [%d, +%d) up to %d: %w", st.Size, off, n, need, rdma.ErrInvalidArgument)
		}
	}
	b, err := unix.Mmap(fd, int64(off), int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", n, err)
	}
	liveMaps.Add(1)
	return b, nil
}

func unmap(b []byte) {
	if b == nil {
		return
	}
	if err := unix.Munmap(b); err == nil {
		liveMaps.Add(-1)
	}
}

// LiveMappings returns how many shared mappings the ipc domains of this
// process hold (connection pages, and peers' regions: one per range of a
// peer's buffer, however many endpoints write into it): zero once every
// domain closed.
func LiveMappings() int64 { return liveMaps.Load() }

var pageSize = uint64(unix.Getpagesize())

func pageDown(x uint64) uint64 { return x &^ (pageSize - 1) }
func pageUp(x uint64) uint64   { return (x + pageSize - 1) &^ (pageSize - 1) }

func unsafeAddr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }
