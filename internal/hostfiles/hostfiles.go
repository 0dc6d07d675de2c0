package hostfiles

import (
	"fmt"
	"sort"
	"sync"

	"github.com/ferryrdma/ferry/internal/errdefs"
	"golang.org/x/sys/unix"
)

// File is a duplicate descriptor of the memory file behind a range of a
// host mapping. The receiver owns FD and closes it.
type File struct {
	FD     int
	Offset uint64 // where the range starts in the file
	Size   uint64 // the bytes of the file the mapping covers
	// PageSize is the file's page size when it is larger than the
	// system's (huge pages), else 0: a peer maps it at offsets and
	// lengths that are multiples of it.
	PageSize uint64
}

// mapping is one memfd mapped at addr for size bytes; fd is the mapper's
// own descriptor, duplicated for every lookup.
type mapping struct {
	addr     uintptr
	size     uint64
	fd       int
	pageSize uint64
}

var index struct {
	mu   sync.Mutex
	maps []mapping // sorted by address
}

// Add records that [addr, addr+size) maps the memory file fd. The caller
// keeps fd open until it called Remove.
func Add(addr uintptr, size uint64, fd int) { AddPaged(addr, size, fd, 0) }

// AddPaged is Add for a file of pageSize pages (huge pages; 0 for the
// system's page size).
func AddPaged(addr uintptr, size uint64, fd int, pageSize uint64) {
	index.mu.Lock()
	defer index.mu.Unlock()
	i := sort.Search(len(index.maps), func(i int) bool { return index.maps[i].addr >= addr })
	index.maps = append(index.maps, mapping{})
	copy(index.maps[i+1:], index.maps[i:])
	index.maps[i] = mapping{addr: addr, size: size, fd: fd, pageSize: pageSize}
}

// Remove forgets the mapping at addr (added with fd).
func Remove(addr uintptr, fd int) {
	index.mu.Lock()
	defer index.mu.Unlock()
	for i, m := range index.maps {
		if m.addr == addr && m.fd == fd {
			index.maps = append(index.maps[:i], index.maps[i+1:]...)
			return
		}
	}
}

// Lookup returns the memory file behind [addr, addr+n) when the range lies
// inside one recorded mapping, with a fresh close-on-exec descriptor the
// caller must close. Any other memory gives an error wrapping
// ErrNotSupported; an empty or wrapping range, ErrInvalidArgument.
func Lookup(addr uintptr, n uint64) (File, error) {
	if n == 0 || addr+uintptr(n) < addr {
		return File{}, fmt.Errorf("host memory file of [%#x, +%d): %w", addr, n, errdefs.ErrInvalidArgument)
	}
	index.mu.Lock()
	defer index.mu.Unlock()
	i := sort.Search(len(index.maps), func(i int) bool { return index.maps[i].addr > addr }) - 1
	if i < 0 {
		return File{}, errNotHostFile(addr, n)
	}
	m := index.maps[i]
	if uint64(addr-m.addr) > m.size || n > m.size-uint64(addr-m.addr) {
		return File{}, errNotHostFile(addr, n)
	}
	fd, err := unix.FcntlInt(uintptr(m.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return File{}, fmt.Errorf("dup host memory file: %w", err)
	}
	return File{FD: fd, Offset: uint64(addr - m.addr), Size: m.size, PageSize: m.pageSize}, nil
}

func errNotHostFile(addr uintptr, n uint64) error {
	return fmt.Errorf("[%#x, +%d) is not inside one memfd-backed fabric.AllocHost buffer: %w", addr, n, errdefs.ErrNotSupported)
}
