package hostfiles

import (
	"errors"
	"testing"

	"github.com/ferryrdma/ferry/internal/errdefs"
	"golang.org/x/sys/unix"
)

func TestLookup(t *testing.T) {
	fd, err := unix.MemfdCreate("hostfiles-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create: %v", err)
	}
	defer unix.Close(fd)
	const base, size = uintptr(0x10000000), uint64(1 << 20)
	Add(base, size, fd)
	f, err := Lookup(base+4096, 100)
	if err != nil {
		t.Fatal(err)
	}
	if f.Offset != 4096 || f.Size != size || f.FD == fd {
		t.Fatalf("lookup: %+v (the mapper's fd is %d)", f, fd)
	}
	unix.Close(f.FD)
	for _, c := range []struct {
		addr uintptr
		n    uint64
		want error
	}{
		{base - 1, 2, errdefs.ErrNotSupported},
		{base + uintptr(size) - 1, 2, errdefs.ErrNotSupported},
		{base, 0, errdefs.ErrInvalidArgument},
		{^uintptr(0), 2, errdefs.ErrInvalidArgument},
	} {
		if _, err := Lookup(c.addr, c.n); !errors.Is(err, c.want) {
			t.Errorf("Lookup(%#x, %d): %v, want %v", c.addr, c.n, err, c.want)
		}
	}
	Remove(base, fd)
	if _, err := Lookup(base, 1); !errors.Is(err, errdefs.ErrNotSupported) {
		t.Fatalf("after Remove: %v", err)
	}
}
