package fabric

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/internal/shm"
)

// HugePages says whether AllocHostWith backs a buffer with huge pages.
// Huge pages are configured by the administrator (vm.nr_hugepages); they
// make a large registration cheaper (the NIC pins and maps 512 times fewer
// pages of 2 MiB than of 4 KiB) and spare the TLB on large transfers.
type HugePages int

const (
	// HugePagesAuto uses huge pages when the system has enough free and
	// the buffer is at least one huge page, with rounding up to whole
	// huge pages adding at most an eighth; else base pages, silently
	// (HostBuffer.PageSize says which it got).
	HugePagesAuto HugePages = iota
	// HugePagesNever always uses base pages.
	HugePagesNever
	// HugePagesRequired fails when the buffer cannot have huge pages: an
	// error wrapping ErrNotSupported (no hugetlbfs, or no memfd) or
	// ErrNoMemory (not enough free huge pages).
	HugePagesRequired
)

// HostOptions are AllocHostWith's options. The zero value is AllocHost's.
type HostOptions struct {
	HugePages HugePages
}

// PageSize returns the size of the pages backing the buffer: the
// system's base page size, or the huge page size.
func (h *HostBuffer) PageSize() int {
	if h.hugePage > 0 {
		return h.hugePage
	}
	return unix.Getpagesize()
}

// HugePageSize returns the system's default huge page size in bytes, or 0
// where it has none.
func HugePageSize() int {
	hugeInfo.once.Do(func() { hugeInfo.size = readHugePageSize() })
	return hugeInfo.size
}

var hugeInfo struct {
	once sync.Once
	size int
}

func readHugePageSize() int {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Hugepagesize:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// allocHuge maps n bytes of huge pages as mode allows: nil and no error
// when it should fall back to base pages.
func allocHuge(n int, mode HugePages) (*HostBuffer, error) {
	if mode == HugePagesNever {
		return nil, nil
	}
	required := mode == HugePagesRequired
	hps := HugePageSize()
	if hps == 0 {
		if required {
			return nil, fmt.Errorf("alloc %d bytes of huge pages: this system has none: %w", n, ErrNotSupported)
		}
		return nil, nil
	}
	rounded := (n + hps - 1) / hps * hps
	if !required && (n < hps || rounded-n > n/8) {
		return nil, nil
	}
	fd, ps, size, err := shm.CreateHuge(hostFileName, int64(n))
	if err != nil {
		if required {
			return nil, fmt.Errorf("alloc %d bytes of huge pages: %w: %w", n, err, ErrNotSupported)
		}
		return nil, nil
	}
	b, err := shm.Map(fd, 0, int(size))
	if err != nil {
		_ = unix.Close(fd)
		if !required {
			return nil, nil
		}
		if errors.Is(err, unix.ENOMEM) {
			return nil, fmt.Errorf("alloc %d bytes of huge pages (%d free of %d bytes): %w: %w", n, freeHugePages(), ps, err, ErrNoMemory)
		}
		return nil, fmt.Errorf("alloc %d bytes of huge pages: %w", n, memErr(err))
	}
	return &HostBuffer{b: b, file: fd, hugePage: ps}, nil
}

// freeHugePages reads HugePages_Free (for error messages), or -1.
func freeHugePages() int {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "HugePages_Free:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return -1
}
