package topology

import (
	"errors"
	"fmt"
)

// Sentinel errors; every error from this package wraps one of them.
var (
	// ErrNoDevice is a device ordinal that is not in the topology.
	ErrNoDevice = errors.New("device not in topology")
	// ErrTooFewNICs is a placement asking for more NICs than a group has.
	ErrTooFewNICs = errors.New("not enough nics")
	// ErrTooFewCPUs is a placement on a group with no CPU.
	ErrTooFewCPUs = errors.New("not enough cpus")
	// ErrMalformed is a sysfs or procfs file whose content cannot be parsed.
	ErrMalformed = errors.New("malformed system file")
	// ErrInvalidSpec is a Spec or environment that cannot be honoured, such
	// as a CUDA_VISIBLE_DEVICES naming GPUs by UUID without a GPU list.
	ErrInvalidSpec = errors.New("invalid topology spec")
)

// FileError is a system file that could not be read or parsed. It wraps
// ErrMalformed for parse failures, or the underlying read error.
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string { return fmt.Sprintf("topology: %s: %v", e.Path, e.Err) }
func (e *FileError) Unwrap() error { return e.Err }

func malformed(path, format string, args ...any) error {
	return &FileError{Path: path, Err: fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrMalformed)}
}
