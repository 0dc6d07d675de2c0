package fabric

import (
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/hostfiles"
	"golang.org/x/sys/unix"
)

// Host memory is a shared mapping of a memfd so that a provider of the
// same host (ipc) can pass the file to a peer process over a unix socket
// and let it write straight into the pages. The file is sealed against
// growing and shrinking: a peer holding it cannot truncate it under our
// mapping (which would turn our accesses into SIGBUS).

// hostFileName is the memfd's name, as /proc/PID/maps shows it.
const hostFileName = "ferry-host"

const hostFileSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// allocHostFile maps size bytes of a new sealed memfd. It returns nil and
// no error where the kernel refuses memfd_create (old kernels, seccomp
// filters): the caller then falls back to anonymous memory.
func allocHostFile(size int) (*HostBuffer, error) {
	fd, err := memfdCreate(hostFileName)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, nil
		}
		return nil, fmt.Errorf("memfd_create: %w", memErr(err))
	}
	fail := func(op string, err error) (*HostBuffer, error) {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("host memory of %d bytes: %s: %w", size, op, memErr(err))
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("ftruncate", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, hostFileSeals); err != nil {
		return fail("seal", err)
	}
	b, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	return &HostBuffer{b: b, file: fd}, nil
}

// memfdCreate asks for a non-executable memfd where the kernel knows the
// flag (6.3 and later warn without it) and a plain one elsewhere.
func memfdCreate(name string) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_NOEXEC_SEAL)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	return fd, err
}

// HostFile is a duplicate descriptor of the memory file behind a range of
// a HostBuffer. The receiver owns FD and closes it.
type HostFile = rdma.HostFile

// HostMemoryFile returns the memory file behind [addr, addr+n) when the
// range lies inside one live memfd-backed HostBuffer (see AllocHost),
// with a fresh close-on-exec descriptor the caller must close. Any other
// memory (anonymous, C, GPU) gives an error wrapping ErrNotSupported.
//
// Whoever gets the descriptor can map the whole buffer, not only the
// range: hand it only to peers trusted with all of it.
func HostMemoryFile(addr uintptr, n uint64) (HostFile, error) { return rdma.HostMemoryFile(addr, n) }

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
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("map host file %d: not a memfd sealed with F_SEAL_SHRINK (seals %#x, %v): %w", fd, seals, err, ErrInvalidArgument)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("map host file %d: %w", fd, err)
	}
	if int64(size) > st.Size {
		return nil, fmt.Errorf("map host file %d: %d bytes of a %d-byte file: %w", fd, size, st.Size, ErrInvalidArgument)
	}
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("map host file %d: dup: %w", fd, err)
	}
	// Whole pages, as Free unmaps them; the part of the last page past the
	// end of the file is never handed out.
	ps := unix.Getpagesize()
	b, err := unix.Mmap(dup, 0, (size+ps-1)/ps*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		_ = unix.Close(dup)
		return nil, fmt.Errorf("map host file %d: mmap %d bytes: %w", fd, size, memErr(err))
	}
	h := &HostBuffer{b: b[:size:size], file: dup}
	hostfiles.Add(h.Addr(), uint64(cap(h.b)), h.file)
	return h, nil
}
