package fabric_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/fabric"
	_ "github.com/ferryrdma/ferry/ipc"
)

func meminfo(t *testing.T, key string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/meminfo")
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no %s in /proc/meminfo", key)
	return 0
}

// Without free huge pages, AllocHost falls back to base pages and says so;
// HugePagesRequired fails with a typed error.
func TestAllocHostWithoutHugePages(t *testing.T) {
	if fabric.HugePageSize() > 0 && meminfo(t, "HugePages_Free") > 0 {
		t.Skip("this system has free huge pages: the fallback is not reachable (TestAllocHostHugePages runs instead)")
	}
	b, err := fabric.AllocHost(8 << 20)
	require.NoError(t, err)
	defer b.Free()
	require.Equal(t, os.Getpagesize(), b.PageSize())
	require.True(t, b.Shareable())
	_, err = fabric.AllocHostWith(8<<20, fabric.HostOptions{HugePages: fabric.HugePagesRequired})
	require.True(t, errors.Is(err, fabric.ErrNoMemory) || errors.Is(err, fabric.ErrNotSupported), "err %v", err)
	n, err := fabric.AllocHostWith(8<<20, fabric.HostOptions{HugePages: fabric.HugePagesNever})
	require.NoError(t, err)
	require.Equal(t, os.Getpagesize(), n.PageSize())
	require.NoError(t, n.Free())
}

// reserveHugePages makes sure n huge pages are free, raising
// vm.nr_hugepages for the test when it may (root), and restoring it.
func reserveHugePages(t *testing.T, n int) {
	t.Helper()
	if fabric.HugePageSize() == 0 {
		t.Skip("no huge pages in this kernel (no Hugepagesize in /proc/meminfo)")
	}
	if meminfo(t, "HugePages_Free") >= n {
		return
	}
	const knob = "/proc/sys/vm/nr_hugepages"
	old, err := os.ReadFile(knob)
	if err != nil || os.Geteuid() != 0 {
		t.Skipf("fewer than %d free huge pages and not root to raise vm.nr_hugepages (configure huge pages to run this)", n)
	}
	cur, err := strconv.Atoi(strings.TrimSpace(string(old)))
	require.NoError(t, err)
	if err := os.WriteFile(knob, []byte(strconv.Itoa(cur+n)), 0); err != nil {
		t.Skipf("raise vm.nr_hugepages: %v", err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(knob, old, 0); err != nil {
			t.Errorf("restore vm.nr_hugepages to %s: %v", strings.TrimSpace(string(old)), err)
		}
	})
	if free := meminfo(t, "HugePages_Free"); free < n {
		t.Skipf("vm.nr_hugepages raised by %d but only %d huge pages are free (memory too fragmented)", n, free)
	}
}

// Huge pages where the system has them: the buffer says so, registers,
// takes writes over mem and over ipc (which maps the file at huge-page
// boundaries in the writer), and frees its pages.
func TestAllocHostHugePages(t *testing.T) {
	reserveHugePages(t, 4)
	hps := fabric.HugePageSize()
	// Mapping reserves the pages (HugePages_Rsvd); they leave
	// HugePages_Free as they are touched.
	avail := func() int { return meminfo(t, "HugePages_Free") - meminfo(t, "HugePages_Rsvd") }
	free := avail()
	b, err := fabric.AllocHostWith(3*hps+100, fabric.HostOptions{HugePages: fabric.HugePagesRequired})
	require.NoError(t, err)
	require.Equal(t, hps, b.PageSize())
	require.Equal(t, 3*hps+100, b.Len())
	require.Zero(t, int(b.Addr())%hps, "huge-page aligned")
	require.Equal(t, free-4, avail(), "4 huge pages taken (3 and the 100 bytes past them)")
	f, err := fabric.HostMemoryFile(b.Addr()+uintptr(2*hps+10), 50)
	require.NoError(t, err)
	require.EqualValues(t, hps, f.PageSize)
	require.EqualValues(t, 2*hps+10, f.Offset)
	_ = unix.Close(f.FD)

	for _, transport := range []string{"mem", "ipc"} {
		t.Run(transport, func(t *testing.T) {
			a, err := fabric.Open(context.Background(), fabric.Config{Transport: transport})
			require.NoError(t, err)
			tgt, err := fabric.Open(context.Background(), fabric.Config{Transport: transport})
			require.NoError(t, err)
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				require.NoError(t, a.Close(ctx))
				require.NoError(t, tgt.Close(ctx))
			}()
			src, err := fabric.AllocHost(4096)
			require.NoError(t, err)
			defer src.Free()
			copy(src.Bytes(), "huge "+transport)
			sreg, err := a.RegisterHost(src, fabric.AccessLocal)
			require.NoError(t, err)
			dreg, err := tgt.RegisterHost(b, fabric.AccessRemoteWrite)
			require.NoError(t, err)
			desc, err := dreg.Descriptor()
			require.NoError(t, err)
			off := uint64(2*hps + 10)
			writeAndWait(t, a, fabric.SingleWrite{Src: sreg, Length: uint64(len("huge " + transport)), Dst: desc, DstOffset: off})
			require.Equal(t, "huge "+transport, string(b.Bytes()[off:off+uint64(len("huge "+transport))]))
			require.NoError(t, a.Unregister(sreg))
			require.NoError(t, tgt.Unregister(dreg))
		})
	}
	require.NoError(t, b.Free())
	require.Equal(t, free, avail(), "the huge pages are free again")
}
