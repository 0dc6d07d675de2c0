//go:build !linux

package shm

import "fmt"

// Seals is zero where memory files do not exist.
const Seals = 0

// Create fails with ErrNotSupported: memfd_create is Linux only.
func Create(name string, size int64) (int, error) {
	return -1, fmt.Errorf("create memory file %q: %w", name, ErrNotSupported)
}

// CreateHuge fails with ErrNotSupported: memfd_create is Linux only.
func CreateHuge(name string, size int64) (int, int, int64, error) {
	return -1, 0, 0, fmt.Errorf("create huge-page file %q: %w", name, ErrNotSupported)
}

// CheckSealed fails with ErrNotSupported.
func CheckSealed(fd int, need uint64) error {
	return fmt.Errorf("memory file %d: %w", fd, ErrNotSupported)
}

// Map fails with ErrNotSupported.
func Map(fd int, off int64, n int) ([]byte, error) {
	return nil, fmt.Errorf("map file %d: %w", fd, ErrNotSupported)
}

// Unmap fails with ErrNotSupported unless b is nil.
func Unmap(b []byte) error {
	if b == nil {
		return nil
	}
	return fmt.Errorf("unmap: %w", ErrNotSupported)
}

// Dup fails with ErrNotSupported.
func Dup(fd int) (int, error) { return -1, fmt.Errorf("dup file %d: %w", fd, ErrNotSupported) }
