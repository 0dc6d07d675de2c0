package fabric

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/internal/shm"
)

// Host memory is a shared mapping of a memfd so that a provider of the
// same host (ipc) can pass the file to a peer process over a unix socket
// and let it write straight into the pages. The file is sealed against
// growing and shrinking: a peer holding it cannot truncate it under our
// mapping (which would turn our accesses into SIGBUS).

// hostFileName is the memfd's name, as /proc/PID/maps shows it.
const hostFileName = "ferry-host"

// allocHostFile maps size bytes of a new sealed memfd. It returns nil and
// no error where the kernel refuses memfd_create (old kernels, seccomp
// filters): the caller then falls back to anonymous memory.
func allocHostFile(size int) (*HostBuffer, error) {
	fd, err := shm.Create(hostFileName, int64(size))
	if err != nil {
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, nil
		}
		return nil, fmt.Errorf("host memory of %d bytes: %w", size, memErr(err))
	}
	b, err := shm.Map(fd, 0, size)
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("host memory of %d bytes: %w", size, memErr(err))
	}
	return &HostBuffer{b: b, file: fd}, nil
}

// hostFiles indexes the live memfd-backed HostBuffers by address, so a
// provider can find the file behind any registered span. It is touched at
// allocation, free and registration, never per operation.
var hostFiles hostFileIndex

type hostFileIndex struct {
	mu   sync.Mutex
	bufs []*HostBuffer // sorted by address
}

func (x *hostFileIndex) add(h *HostBuffer) {
	x.mu.Lock()
	defer x.mu.Unlock()
	i := sort.Search(len(x.bufs), func(i int) bool { return x.bufs[i].Addr() >= h.Addr() })
	x.bufs = append(x.bufs, nil)
	copy(x.bufs[i+1:], x.bufs[i:])
	x.bufs[i] = h
}

func (x *hostFileIndex) remove(h *HostBuffer) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i, b := range x.bufs {
		if b == h {
			x.bufs = append(x.bufs[:i], x.bufs[i+1:]...)
			return
		}
	}
}

// HostFile is a duplicate descriptor of the memory file behind a range of
// a HostBuffer. The receiver owns FD and closes it.
type HostFile struct {
	FD     int
	Offset uint64 // where the range starts in the file
	Size   uint64 // the bytes of the file the HostBuffer maps
}

// HostMemoryFile returns the memory file behind [addr, addr+n) when the
// range lies inside one live memfd-backed HostBuffer (see AllocHost),
// with a fresh close-on-exec descriptor the caller must close. Any other
// memory (anonymous, C, GPU) gives an error wrapping ErrNotSupported.
//
// Whoever gets the descriptor can map the whole buffer, not only the
// range: hand it only to peers trusted with all of it.
func HostMemoryFile(addr uintptr, n uint64) (HostFile, error) {
	if n == 0 || addr+uintptr(n) < addr {
		return HostFile{}, fmt.Errorf("host memory file of [%#x, +%d): %w", addr, n, ErrInvalidArgument)
	}
	x := &hostFiles
	x.mu.Lock()
	defer x.mu.Unlock()
	i := sort.Search(len(x.bufs), func(i int) bool { return x.bufs[i].Addr() > addr }) - 1
	if i < 0 {
		return HostFile{}, errNotHostFile(addr, n)
	}
	h := x.bufs[i]
	start := h.Addr()
	if addr-start > uintptr(cap(h.b)) || n > uint64(cap(h.b))-uint64(addr-start) {
		return HostFile{}, errNotHostFile(addr, n)
	}
	fd, err := shm.Dup(h.file)
	if err != nil {
		return HostFile{}, fmt.Errorf("host memory file: %w", err)
	}
	return HostFile{FD: fd, Offset: uint64(addr - start), Size: uint64(cap(h.b))}, nil
}

func errNotHostFile(addr uintptr, n uint64) error {
	return fmt.Errorf("[%#x, +%d) is not inside one memfd-backed fabric.AllocHost buffer: %w", addr, n, ErrNotSupported)
}

// MapHostFile maps the first size bytes of a memory file the caller made
// (memfd_create with MFD_ALLOW_SEALING) as a HostBuffer that same-host
// providers share like AllocHost memory: for buffers a program also hands
// to other processes itself. The file must be sealed against shrinking
// (F_SEAL_SHRINK), so no holder can truncate it under a mapping. The
// buffer keeps a duplicate of fd: the caller may close its own.
func MapHostFile(fd int, size int) (*HostBuffer, error) {
	if fd < 0 || size <= 0 {
		return nil, fmt.Errorf("map host file %d of %d bytes: %w", fd, size, ErrInvalidArgument)
	}
	if err := shm.CheckSealed(fd, uint64(size)); err != nil {
		return nil, fmt.Errorf("map host file %d: %w: %w", fd, err, ErrInvalidArgument)
	}
	dup, err := shm.Dup(fd)
	if err != nil {
		return nil, fmt.Errorf("map host file %d: %w", fd, err)
	}
	// Whole pages, as Free unmaps them; the part of the last page past the
	// end of the file is never handed out.
	ps := unix.Getpagesize()
	b, err := shm.Map(dup, 0, (size+ps-1)/ps*ps)
	if err != nil {
		_ = unix.Close(dup)
		return nil, fmt.Errorf("map host file %d: %w", fd, memErr(err))
	}
	h := &HostBuffer{b: b[:size:size], file: dup}
	hostFiles.add(h)
	return h, nil
}
