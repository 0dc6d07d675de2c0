package fabricbench

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/fabric"
)

// TestRegFloodVariants runs the flood-while-register benchmark over the
// in-process provider with a small region, fresh and prefaulted: every
// round yields a flood rate during the registration and in the quiet
// windows, and the report names the variant.
func TestRegFloodVariants(t *testing.T) {
	for _, prefault := range []bool{false, true} {
		var progress bytes.Buffer
		s := RegFloodSpec{Transport: "mem", Bytes: 4 << 10, Depth: 8, RegisterBytes: 8 << 20, Rounds: 2,
			RegNICs: []int{1, 2}, HugePages: fabric.HugePagesNever, Prefault: prefault, Progress: &progress,
			OnWorker: []bool{false}}
		if prefault {
			// The window is kept busy with registrations of the kept
			// region.
			s.Window = 300 * time.Millisecond
		}
		rep, err := RegFlood(testCtx(t), s)
		require.NoError(t, err)
		require.Len(t, rep.Flood, 1)
		f := rep.Flood[0]
		require.Positive(t, f.Quiet, "quiet rate")
		require.Positive(t, f.During, "rate while registering")
		require.Positive(t, f.Ratio)
		require.Len(t, f.Rounds, 2)
		require.Len(t, rep.Reg, 2)
		for _, g := range rep.Reg {
			require.NoError(t, g.Err)
		}
		want := map[bool]string{false: "base pages, fresh", true: "base pages, prefaulted"}[prefault]
		require.Equal(t, want, rep.Spec.Variant())
		var out bytes.Buffer
		rep.Print(&out)
		require.Contains(t, out.String(), want)
		if prefault {
			require.Equal(t, 1+len(s.RegNICs), strings.Count(progress.String(), "prefaulted in"), "one region for the rounds, one per NIC count alone")
			require.Regexp(t, `round 1 beside: register \S+ \([2-9]\d* registration`, progress.String(),
				"a registration of 8 MiB takes less than 300 ms: it is repeated")
		} else {
			require.Contains(t, progress.String(), "fresh")
		}
	}
}

// TestPopulate: after populate every page of a fresh buffer is resident.
func TestPopulate(t *testing.T) {
	b, err := fabric.AllocHostWith(4<<20, fabric.HostOptions{HugePages: fabric.HugePagesNever})
	require.NoError(t, err)
	defer b.Free()
	resident := func() int {
		vec := make([]byte, b.Len()/b.PageSize())
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, b.Addr(), uintptr(b.Len()), uintptr(unsafe.Pointer(&vec[0])))
		require.Zero(t, errno)
		n := 0
		for _, v := range vec {
			n += int(v & 1)
		}
		return n
	}
	require.Less(t, resident(), len(b.Bytes())/b.PageSize(), "a fresh buffer is not all resident")
	populate(b)
	require.Equal(t, b.Len()/b.PageSize(), resident())
}
