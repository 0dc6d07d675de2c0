package shm

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Seals are the seals Create puts on a file: no shrinking, no growing, no
// further sealing (nobody can add a write seal under a writer).
const Seals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// Create returns a close-on-exec memory file of size bytes named name (as
// /proc/PID/maps shows it, after "/memfd:"), sealed with Seals. Pages are
// allocated when first touched. Errors wrap the errno, so a caller can
// tell a kernel or sandbox without memfd_create (ENOSYS, EPERM, EACCES)
// from a lack of memory.
func Create(name string, size int64) (int, error) {
	if size < 0 {
		return -1, fmt.Errorf("create memory file %q of %d bytes: %w", name, size, unix.EINVAL)
	}
	// Non-executable where the kernel knows the flag (6.3 and later warn
	// when it is missing); older kernels refuse it with EINVAL.
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_NOEXEC_SEAL)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return -1, fmt.Errorf("memfd_create %q: %w", name, err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("size memory file %q to %d bytes: %w", name, size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, Seals); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("seal memory file %q: %w", name, err)
	}
	return fd, nil
}

// CreateHuge is Create for a file of huge pages (memfd_create with
// MFD_HUGETLB, the system's default huge page size): size is rounded up to
// whole huge pages, and the page size is returned with the rounded size.
// It fails where the kernel has no hugetlbfs; a system with no free huge
// pages fails later, when the file is mapped (mmap reserves them).
func CreateHuge(name string, size int64) (fd int, pageSize int, rounded int64, err error) {
	if size <= 0 {
		return -1, 0, 0, fmt.Errorf("create huge-page file %q of %d bytes: %w", name, size, unix.EINVAL)
	}
	fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_HUGETLB)
	if err != nil {
		return -1, 0, 0, fmt.Errorf("memfd_create %q with MFD_HUGETLB: %w", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Blksize <= 0 {
		_ = unix.Close(fd)
		if err == nil {
			err = unix.EINVAL
		}
		return -1, 0, 0, fmt.Errorf("huge page size of %q: %w", name, err)
	}
	ps := int64(st.Blksize)
	rounded = (size + ps - 1) / ps * ps
	if err := unix.Ftruncate(fd, rounded); err != nil {
		_ = unix.Close(fd)
		return -1, 0, 0, fmt.Errorf("size huge-page file %q to %d bytes: %w", name, rounded, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, Seals); err != nil {
		_ = unix.Close(fd)
		return -1, 0, 0, fmt.Errorf("seal huge-page file %q: %w", name, err)
	}
	return fd, int(ps), rounded, nil
}

// CheckSealed verifies that fd, a file from another process, is sealed
// against shrinking and holds at least need bytes: only then can a mapping
// of its first need bytes never fault. Errors wrap ErrNotSealed or
// ErrTooSmall.
func CheckSealed(fd int, need uint64) error {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return fmt.Errorf("memory file %d: read seals: %v: %w", fd, err, ErrNotSealed)
	}
	if seals&unix.F_SEAL_SHRINK == 0 {
		return fmt.Errorf("memory file %d has seals %#x, without F_SEAL_SHRINK: %w", fd, seals, ErrNotSealed)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat memory file %d: %w", fd, err)
	}
	if st.Size < 0 || uint64(st.Size) < need {
		return fmt.Errorf("memory file %d of %d bytes, %d needed: %w", fd, st.Size, need, ErrTooSmall)
	}
	return nil
}

// Map maps n bytes of fd from offset off (a multiple of the page size),
// shared and writable.
func Map(fd int, off int64, n int) ([]byte, error) {
	if n <= 0 || off < 0 {
		return nil, fmt.Errorf("map [%d, +%d) of file %d: %w", off, n, fd, unix.EINVAL)
	}
	b, err := unix.Mmap(fd, off, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes of file %d: %w", n, fd, err)
	}
	return b, nil
}

// Unmap releases a mapping made by Map (nil is ignored).
func Unmap(b []byte) error {
	if b == nil {
		return nil
	}
	if err := unix.Munmap(b); err != nil {
		return fmt.Errorf("munmap %d bytes: %w", len(b), err)
	}
	return nil
}

// Dup returns a new close-on-exec descriptor of fd's file.
func Dup(fd int) (int, error) {
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("dup file %d: %w", fd, err)
	}
	return d, nil
}
