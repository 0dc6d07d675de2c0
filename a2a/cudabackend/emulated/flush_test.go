package emulated_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/cudabackend/emulated"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	"github.com/ferryrdma/ferry/memfabric"
)

// TestEmuLateRDMAData runs the emulated backend over memfabric's late-data
// mode: every RDMA write into a rank's receive buffer reports its
// immediate (so the engine raises the kernels' flag) before its bytes
// land, which is how a GPU below sm_90, or on a C2C link, may see the
// NIC's writes against the flag the CPU raises. The bytes land only when
// the device's RDMA flush runs (memfabric.Flush), which the backend must
// call between the engine's count and the flag: with the flush every row
// equals the oracle; without it (epochFlag.Set not flushing) the kernels
// read the poisoned rows and the results differ.
func TestEmuLateRDMAData(t *testing.T) {
	cfg := a2a.Config{WorldSize: 4, NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 8, Hidden: 40, Scales: 3,
		DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 3, PrivateTokens: 2}
	var flushes atomic.Int64
	flush := func() error {
		flushes.Add(int64(memfabric.Flush()))
		return nil
	}
	w := newWorldOn(t, cfg, "mem", cudabackend.Options{}, func() cudabackend.Device { return emulated.NewFlushingDevice(flush) })
	type span struct{ lo, hi uint64 }
	var recv []span
	for _, m := range w.members {
		_, r := m.Buffers()
		recv = append(recv, span{r.Addr(), r.Addr() + uint64(w.l.RecvBytes)})
	}
	memfabric.SetLateData(func(addr, n uint64) bool {
		for _, s := range recv {
			if addr >= s.lo && addr+n <= s.hi {
				return true
			}
		}
		return false
	})
	t.Cleanup(func() {
		memfabric.SetLateData(nil)
		memfabric.Flush()
	})
	a2atest.Run(t, cfg, &a2atest.World{Contexts: w.ctxs, BeforeIteration: w.poison, Timeout: time.Minute}, 5, 3)
	if flushes.Load() == 0 {
		t.Fatal("no RDMA write was held back: the test did not exercise late data")
	}
	t.Logf("%d RDMA writes landed at a flush", flushes.Load())
}
