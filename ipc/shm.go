package ipc

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/shm"
)

// Shared memory: every mapping this package makes goes through mapFile and
// unmap, so the live count is exact (tests check it returns to zero).
var liveMaps atomic.Int64

// newMemfd returns a sealed memfd of size bytes (pages are allocated only
// when touched).
func newMemfd(name string, size int) (int, error) { return shm.Create(name, int64(size)) }

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
		if need > off+n {
			return nil, fmt.Errorf("peer memory file: mapping [%d, +%d) up to %d: %w", off, n, need, rdma.ErrInvalidArgument)
		}
		switch err := shm.CheckSealed(fd, need); {
		case errors.Is(err, shm.ErrNotSealed):
			return nil, fmt.Errorf("peer memory file: %w: %w", err, rdma.ErrNotSupported)
		case errors.Is(err, shm.ErrTooSmall):
			return nil, fmt.Errorf("peer memory file: mapping [%d, +%d): %w: %w", off, n, err, rdma.ErrInvalidArgument)
		case err != nil:
			return nil, fmt.Errorf("peer memory file: %w", err)
		}
	}
	b, err := shm.Map(fd, int64(off), int(n))
	if err != nil {
		return nil, err
	}
	liveMaps.Add(1)
	return b, nil
}

func unmap(b []byte) {
	if b == nil {
		return
	}
	if err := shm.Unmap(b); err == nil {
		liveMaps.Add(-1)
	}
}

// LiveMappings returns how many shared mappings the ipc domains of this
// process hold (connection pages, and peers' regions: one per range of a
// peer's buffer, however many endpoints write into it): zero once every
// domain closed.
func LiveMappings() int64 { return liveMaps.Load() }

var pageSize = uint64(unix.Getpagesize())

func unsafeAddr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }
