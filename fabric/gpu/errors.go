package gpu

import (
	"errors"
	"fmt"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/fabric"
)

// Sentinel errors of this package. Errors that mean bad input also match
// fabric.ErrInvalidArgument, so one errors.Is test works across packages.
var (
	// ErrNotDeviceMemory is matched by a *MemoryTypeError: an address
	// given as GPU memory that the driver does not know as device memory.
	ErrNotDeviceMemory = errors.New("not cuda device memory")
	// ErrNoFreeSlot means every slot of a Watcher is acquired.
	ErrNoFreeSlot = errors.New("no free watcher slot")
	// ErrReleased is returned by a second Release of a watcher Slot.
	ErrReleased = errors.New("watcher slot already released")
)

// MemoryTypeError says that an address is not device memory: plain or
// pinned host memory, managed memory, or memory the driver does not know.
// It matches ErrNotDeviceMemory and fabric.ErrInvalidArgument, and wraps
// the driver's error when there was one.
type MemoryTypeError struct {
	Addr uintptr
	Type cuda.MemoryType // cuda.MemoryUnknown when the driver did not know it
	Err  error           // the driver's answer, or nil
}

func (e *MemoryTypeError) Error() string {
	s := fmt.Sprintf("gpu: %#x is %s memory, not cuda device memory", e.Addr, e.Type)
	if e.Err != nil {
		s += " (" + e.Err.Error() + ")"
	}
	return s
}

// Is matches ErrNotDeviceMemory and fabric.ErrInvalidArgument.
func (e *MemoryTypeError) Is(target error) bool {
	return target == ErrNotDeviceMemory || target == fabric.ErrInvalidArgument
}

// Unwrap returns the driver's error, if any.
func (e *MemoryTypeError) Unwrap() error { return e.Err }

func invalid(format string, args ...any) error {
	return fmt.Errorf("gpu: "+format+": %w", append(args, fabric.ErrInvalidArgument)...)
}
