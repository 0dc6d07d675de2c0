package fabric

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMemErr: failed memory calls keep their errno and gain a category.
func TestMemErr(t *testing.T) {
	for errno, want := range map[unix.Errno]error{
		unix.ENOMEM: ErrNoMemory, unix.EAGAIN: ErrNoMemory, unix.ENFILE: ErrNoMemory,
		unix.EINVAL: ErrInvalidArgument, unix.EOVERFLOW: ErrInvalidArgument,
	} {
		err := memErr(errno)
		if !errors.Is(err, want) || !errors.Is(err, errno) {
			t.Errorf("memErr(%v) = %v: want it to wrap %v and the errno", errno, err, want)
		}
	}
}
