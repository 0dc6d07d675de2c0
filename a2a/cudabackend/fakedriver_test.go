//go:build cgo && linux

package cudabackend

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	cu "github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/internal/testutil"
)

const fakeDriverEnv = "FERRY_TEST_A2A_FAKE_CUDA"

// TestDriverProcessNodeFakeDriver shares node buffers through the
// DriverDevice's CUDA VMM calls against package cuda's fake driver
// (cuda/testdata/fakecuda.c, whose VMM allocations are memfds): three node
// ranks (goroutines, real sockets) allocate exportable memory, export,
// import and map each other's; a store through one mapping is read
// through another; after Close the driver holds no VMM handle, mapping or
// reserved range, and no descriptor is left open. It checks the calls and
// their order, not a GPU's semantics (TestGPUNodeProcesses does that).
func TestDriverProcessNodeFakeDriver(t *testing.T) {
	if os.Getenv(fakeDriverEnv) == "1" {
		fakeDriverNode(t)
		return
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler to build the fake driver with")
	}
	lib := filepath.Join(t.TempDir(), "libcuda.so.1")
	if msg, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, "../../cuda/testdata/fakecuda.c").CombinedOutput(); err != nil {
		t.Fatalf("build the fake driver: %v\n%s", err, msg)
	}
	testutil.RunTest(t, "TestDriverProcessNodeFakeDriver", testutil.SpawnOptions{Env: []string{fakeDriverEnv + "=1",
		"FERRY_CUDA_DRIVER=" + lib}})
}

// fakeStat reads a counter of the fake driver (device attribute 9000+i).
func fakeStat(t *testing.T, d cu.Device, i int) int {
	t.Helper()
	v, err := d.Attribute(cu.Attribute(9000 + i))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The fake driver's counters (fake_stats in fakecuda.c).
const (
	fakeRDMA        = 4
	fakeAccessCount = 7
	fakeVMMHandles  = 9
	fakeVMMMappings = 10
	fakeVMMRanges   = 11
	fakeFlushes     = 12
)

func fakeDriverNode(t *testing.T) {
	if err := cu.Init(); err != nil {
		t.Fatal(err)
	}
	d0, err := cu.GetDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d0.PrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	dev, err := NewDriverDevice(c)
	if err != nil {
		t.Fatal(err)
	}
	// Exportable memory asks for GPUDirect RDMA where the device can have
	// it (the fake's device 0 can), so the engine may register it.
	m, err := dev.AllocExportable(1)
	if err != nil {
		t.Fatal(err)
	}
	if fakeStat(t, d0, fakeRDMA) != 1 || m.Size() != 2<<20 {
		t.Fatalf("exportable memory of %d bytes, GPUDirect RDMA %d", m.Size(), fakeStat(t, d0, fakeRDMA))
	}
	if err := m.Free(); err != nil {
		t.Fatal(err)
	}
	// The control block: no gdrdrv here, so host-mapped memory; its words
	// are the mapped memory's (the device pointer sees what the CPU
	// stored). The fake device 0 is C2C-attached: the device flushes.
	ctl, err := dev.AllocControl(ctrlBytes)
	if err != nil {
		t.Fatal(err)
	}
	ctl.Word(64 * 6).Store(42)
	got := make([]byte, 4)
	if err := c.CopyDtoH(got, cu.DevicePtr(ctl.Addr()+64*6)); err != nil {
		t.Fatal(err)
	}
	if ctl.Kind() != "host-mapped" || got[0] != 42 || ctl.Word(64*6).Load() != 42 {
		t.Fatalf("control block %s: device reads %v", ctl.Kind(), got)
	}
	if err := ctl.Free(); err != nil {
		t.Fatal(err)
	}
	if err := dev.FlushRDMA(); err != nil || fakeStat(t, d0, fakeFlushes) != 2 {
		t.Fatalf("flush: %v, %d flushes reached the driver (New's check and this one)", err, fakeStat(t, d0, fakeFlushes))
	}
	fds, maps := resources(t)
	cfg := a2a.Config{WorldSize: 3, NVLinkSize: 3, MaxTokens: 4, Hidden: 8, DispatchType: a2a.BF16,
		CombineType: a2a.BF16, Experts: 3, ExpertsPerToken: 2}
	const sendBytes, recvBytes = 3 << 20, 1 << 20 // the fake's granularity is 2 MiB
	x := a2atest.NewExchange(3)
	nodes := make([]*ProcessNode, 3)
	send, recv := make([][]uint64, 3), make([][]uint64, 3)
	errs := make([]error, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for r := range 3 {
		cfg := cfg
		cfg.Rank = r
		if nodes[r], err = NewProcessNode(cfg, x.Member(r), dev); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { send[r], recv[r], errs[r] = nodes[r].Share(ctx, sendBytes, recvBytes) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// Each rank: 2 allocations and 4 imports, each a handle, a range and
	// a mapping, with access set for the one device.
	if h, m, rg := fakeStat(t, d0, fakeVMMHandles), fakeStat(t, d0, fakeVMMMappings), fakeStat(t, d0, fakeVMMRanges); h != 18 || m != 18 || rg != 18 {
		t.Fatalf("vmm handles %d, mappings %d, ranges %d; want 18 each", h, m, rg)
	}
	if fakeStat(t, d0, fakeAccessCount) != 1 {
		t.Fatal("access set for other devices too")
	}
	for r := range 3 {
		for q := range 3 {
			if q == r {
				continue
			}
			// Rank r writes into rank q's receive buffer through its import;
			// rank q reads it through its own mapping.
			msg := []byte{byte(r), byte(q), 0xa5}
			if err := dev.Upload(recv[r][q]+uint64(16*r), msg); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 3)
			if err := dev.Download(got, recv[q][q]+uint64(16*r)); err != nil {
				t.Fatal(err)
			}
			if string(got) != string(msg) || recv[r][q] == recv[q][q] || send[r][q] == send[q][q] {
				t.Fatalf("rank %d's view of rank %d's receive buffer: wrote %v, owner reads %v", r, q, msg, got)
			}
		}
	}
	for _, n := range nodes {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{fakeVMMHandles, fakeVMMMappings, fakeVMMRanges} {
		if v := fakeStat(t, d0, i); v != 0 {
			t.Fatalf("fake statistic %d is %d after closing the node", i, v)
		}
	}
	checkReleased(t, fds, maps)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
