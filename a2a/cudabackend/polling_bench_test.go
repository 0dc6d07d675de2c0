package cudabackend

import (
	"context"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hostMemory is a Memory of ordinary Go bytes, for the worker alone.
type hostMemory struct{ b []byte }

func (m hostMemory) Addr() uint64  { return 0 }
func (m hostMemory) Bytes() []byte { return m.b }
func (m hostMemory) Free() error   { return nil }

func processCPUNs() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func threadCPUNs() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}

// BenchmarkWorkerWake measures the trade-off of Options.Polling: a
// stand-in for a kernel raises a control word after gap (the kernel's
// work between two flags), the worker waits for it with await; reported
// are the worker's wake-up delay (raise to return, median and p99 over
// the run) and the CPU the worker burnt per wait (the process's CPU less
// the stand-in's). Run with
// -benchtime=200x or so: spinning holds a core for the whole run.
func BenchmarkWorkerWake(b *testing.B) {
	for _, gap := range []time.Duration{20 * time.Microsecond, 200 * time.Microsecond} {
		for _, mode := range []struct {
			name string
			spin bool
		}{{"spin", true}, {"backoff", false}} {
			b.Run(mode.name+"/gap="+gap.String(), func(b *testing.B) {
				bk := &Backend{spin: mode.spin, ctrl: hostControl{hostMemory{make([]byte, ctrlBytes)}}}
				for i := 0; i < ctrlBytes/4; i++ {
					bk.ctrlWords = append(bk.ctrlWords, bk.ctrl.Word(4*i))
				}
				flag := bk.ctrlWord(slotPlanReady, 0)
				var raisedAt, raiserCPU atomic.Int64
				start := make(chan uint32)
				go func() {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					c := threadCPUNs()
					defer func() { raiserCPU.Store(threadCPUNs() - c) }()
					for it := range start {
						t0 := time.Now()
						for time.Since(t0) < gap { // the kernel's work; sleeping would add the timer's slack
						}
						raisedAt.Store(time.Now().UnixNano())
						flag.Store(it)
					}
				}()
				wakes := make([]int64, 0, b.N)
				ctx := context.Background()
				c0 := processCPUNs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					it := uint32(i + 1)
					start <- it
					if err := bk.await(ctx, slotPlanReady, it); err != nil {
						b.Fatal(err)
					}
					wakes = append(wakes, time.Now().UnixNano()-raisedAt.Load())
				}
				b.StopTimer()
				close(start)
				for raiserCPU.Load() == 0 {
					runtime.Gosched()
				}
				// The process's CPU less the stand-in kernel's: the
				// worker's, plus the runtime's (small, the same in both).
				cpu := processCPUNs() - c0 - raiserCPU.Load()
				slices.Sort(wakes)
				b.ReportMetric(float64(wakes[len(wakes)/2]), "wake-p50-ns")
				b.ReportMetric(float64(wakes[len(wakes)*99/100]), "wake-p99-ns")
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// TestPollingDefault: latency first on a GPU by default, economy on the
// emulator (any other Device), and either on demand.
func TestPollingDefault(t *testing.T) {
	var gpu Device = &DriverDevice{}
	var other Device = struct{ Device }{}
	for _, c := range []struct {
		p    Polling
		dev  Device
		want bool
	}{{PollAuto, gpu, true}, {PollAuto, other, false}, {PollSpin, other, true}, {PollBackoff, gpu, false}} {
		if got := c.p.spins(c.dev); got != c.want {
			t.Errorf("polling %d on %T: spins %v, want %v", c.p, c.dev, got, c.want)
		}
	}
}
