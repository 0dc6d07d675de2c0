//go:build cgo

package efa

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rdma"
)

// BenchmarkPostWritesPoll measures the Go data path the engine uses: one
// PostWrites call per batch of writes with immediates, Poll on both ends,
// a bounded window of writes in flight. One iteration is one batch; ops/s
// counts writes confirmed at both ends. Both endpoints are polled from
// the benchmark's goroutine, as the engine's worker polls all its domains;
// polling the target from a second goroutine was measured slower on the
// 2-core build machines.
func BenchmarkPostWritesPoll(b *testing.B) {
	cases := []struct {
		size         uint64
		batch, depth int
	}{
		{64, 64, 4},
		{64 << 10, 8, 4},
		{64 << 20, 1, 2},
	}
	for _, tr := range testTransports {
		for _, c := range cases {
			name := fmt.Sprintf("%s/%s", strings.ReplaceAll(tr.name, ";", "_"), sizeName(c.size))
			b.Run(name, func(b *testing.B) { benchWrites(b, tr, c.size, c.batch, c.depth) })
		}
	}
}

func sizeName(n uint64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

func benchWrites(b *testing.B, tr testTransport, size uint64, batch, depth int) {
	a, t := openTest(b, tr), openTest(b, tr)
	span := max(size*uint64(batch), 4096)
	src := register(b, a, int(span), rdma.AccessLocal)
	dst := register(b, t, int(span), rdma.AccessRemoteWrite)
	peer, err := a.ResolvePeer(t.Address())
	if err != nil {
		b.Fatal(err)
	}
	ops := make([]rdma.WriteOp, batch)
	for i := range ops {
		ops[i] = write(src, uint64(i)*size, dst, uint64(i)*size, size, peer, uint64(i))
		ops[i].Imm, ops[i].Flags = uint32(i), rdma.WriteHasImm
	}
	var writes, imms, posted int
	evs := make([]rdma.Event, 256)
	poll := func() {
		for _, d := range []*Domain{a, t} {
			n, err := d.Poll(evs)
			if err != nil {
				b.Fatal(err)
			}
			for _, ev := range evs[:n] {
				if ev.Errno != 0 {
					b.Fatal(d.DescribeError(ev))
				}
				switch ev.Kind {
				case rdma.EventWrite:
					writes++
				case rdma.EventImm:
					imms++
				}
			}
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	confirmed := func() int { return min(writes, imms) }
	wait := func(limit int) {
		for posted-confirmed() > limit {
			poll()
			if time.Now().After(deadline) {
				b.Fatal("no progress")
			}
		}
	}
	post := func() {
		for rest := ops; len(rest) > 0; {
			n, err := a.PostWrites(rest)
			if err != nil {
				b.Fatal(err)
			}
			rest = rest[n:]
			posted += n
			if len(rest) > 0 {
				poll()
			}
		}
		wait((depth - 1) * batch)
	}
	// Connect and warm up outside the timing.
	post()
	wait(0)
	posted, writes, imms = 0, 0, 0
	b.SetBytes(int64(size) * int64(batch))
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		post()
	}
	wait(0)
	elapsed := time.Since(start)
	b.ReportMetric(float64(posted)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(posted)*float64(size)/elapsed.Seconds()/1e9, "GB/s")
}

// BenchmarkRaw runs RawBench, the C loop with no Go per batch, as the
// ceiling the Go path is compared with.
func BenchmarkRaw(b *testing.B) {
	for _, tr := range testTransports {
		for _, c := range []struct {
			size  uint64
			pages int
		}{{64, 4096}, {64 << 10, 64}, {64 << 20, 0}} {
			name := fmt.Sprintf("%s/%s", strings.ReplaceAll(tr.name, ";", "_"), sizeName(c.size))
			b.Run(name, func(b *testing.B) {
				spec := RawSpec{Transport: tr.name, Node: tr.node, Size: c.size, Pages: c.pages, Iters: 10, Warmup: 2, Imm: true}
				var last RawResult
				for b.Loop() {
					res, err := RawBench(spec)
					if err != nil {
						b.Fatal(err)
					}
					last = res
				}
				b.ReportMetric(last.OpsPerSec(), "ops/s")
				b.ReportMetric(last.GBps(), "GB/s")
				b.ReportMetric(float64(last.Median().Nanoseconds()), "p50_ns/iter")
			})
		}
	}
}
