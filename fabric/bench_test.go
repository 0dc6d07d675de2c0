package fabric_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	_ "github.com/ferryrdma/ferry/memfabric"
)

// benchPair opens a writer and a target over the null provider: every op
// completes at once and no byte moves, so what remains is the engine.
func benchPair(b *testing.B, poll fabric.PollMode) (a, t *fabric.Engine, src *fabric.MemoryRegion, desc fabric.Descriptor) {
	b.Helper()
	open := func(poll fabric.PollMode) *fabric.Engine {
		e, err := fabric.Open(context.Background(), fabric.Config{Transport: "null", Poll: poll})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = e.Close(context.Background()) })
		return e
	}
	a, t = open(poll), open(fabric.PollAdaptive)
	buf, err := fabric.AllocHost(1 << 20)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = buf.Free() })
	src, err = a.RegisterHost(buf, fabric.AccessLocal)
	if err != nil {
		b.Fatal(err)
	}
	dr, err := t.RegisterHost(buf, fabric.AccessRemoteWrite)
	if err != nil {
		b.Fatal(err)
	}
	desc, _ = dr.Descriptor()
	return
}

// BenchmarkNullPaged measures the engine's per-op cost: paged writes of
// 64 B over the null provider, reported as ops/s and ns/op per page.
func BenchmarkNullPaged(b *testing.B) {
	for _, pages := range []int{100, 10000} {
		b.Run(fmt.Sprintf("pages=%d", pages), func(b *testing.B) {
			a, _, src, desc := benchPair(b, fabric.PollSpin)
			idx := make([]uint32, pages)
			for i := range idx {
				idx[i] = uint32(i % 1000)
			}
			tc := new(fabric.TransferCounter)
			req := fabric.PagedWrite{Src: src, SrcPages: idx, SrcStride: 64, Dst: desc, DstPages: idx, DstStride: 64, Length: 64}
			ctx := context.Background()
			b.ReportAllocs()
			start := time.Now()
			var n int64
			// Keep a few transfers in flight, as a pipelined user does, so
			// the figure is the worker's throughput, not the waiter's wakeup.
			const depth = 4
			for b.Loop() {
				if err := a.SubmitPaged(req, fabric.Count(tc)); err != nil {
					b.Fatal(err)
				}
				n++
				if err := tc.Wait(ctx, n-depth+1); err != nil {
					b.Fatal(err)
				}
			}
			if err := tc.Wait(ctx, n); err != nil {
				b.Fatal(err)
			}
			el := time.Since(start)
			ops := float64(n) * float64(pages)
			b.ReportMetric(ops/el.Seconds()/1e6, "Mops/s")
			b.ReportMetric(float64(el.Nanoseconds())/ops, "ns/page")
		})
	}
}

// BenchmarkSubmit measures submit -> enqueued: the caller's cost of handing
// an immediate write to a worker, reported as the p50 of single calls.
func BenchmarkSubmit(b *testing.B) {
	a, _, _, desc := benchPair(b, fabric.PollSpin)
	tc := new(fabric.TransferCounter)
	req := fabric.ImmWrite{Imm: 1, Dst: desc}
	lat := make([]time.Duration, 0, 1<<20)
	b.ReportAllocs()
	var n int64
	for b.Loop() {
		t0 := time.Now()
		if err := a.SubmitImm(req, fabric.Count(tc)); err != nil {
			b.Fatal(err)
		}
		if len(lat) < cap(lat) {
			lat = append(lat, time.Since(t0))
		}
		n++
		if n%256 == 0 {
			_ = tc.Wait(context.Background(), n-128)
		}
	}
	_ = tc.Wait(context.Background(), n)
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "submit_p50_ns")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "submit_p99_ns")
	}
}

// BenchmarkNullImm measures per-transfer cost: one immediate-only write per
// transfer, a window of transfers in flight.
func BenchmarkNullImm(b *testing.B) {
	a, _, _, desc := benchPair(b, fabric.PollSpin)
	tc := new(fabric.TransferCounter)
	req := fabric.ImmWrite{Imm: 1, Dst: desc}
	ctx := context.Background()
	b.ReportAllocs()
	var n int64
	start := time.Now()
	for b.Loop() {
		if err := a.SubmitImm(req, fabric.Count(tc)); err != nil {
			b.Fatal(err)
		}
		n++
		if n%64 == 0 {
			_ = tc.Wait(ctx, n-256)
		}
	}
	_ = tc.Wait(ctx, n)
	b.ReportMetric(float64(n)/time.Since(start).Seconds()/1e6, "Mtransfers/s")
}

// BenchmarkNullImmPingPong measures an immediate's round trip between two
// engines, each side waiting for the other's on an ImmCounter: what a
// receiver pays to learn that data arrived (the engines' workers adaptive,
// as on a shared machine).
func BenchmarkNullImmPingPong(b *testing.B) {
	a, t, _, desc := benchPair(b, fabric.PollAdaptive)
	back, err := a.RegisterHost(mustAlloc(b), fabric.AccessRemoteWrite)
	if err != nil {
		b.Fatal(err)
	}
	backDesc, _ := back.Descriptor()
	ping, err := t.ImmCounter(1)
	if err != nil {
		b.Fatal(err)
	}
	pong, err := a.ImmCounter(2)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	echoed := make(chan error, 1)
	go func() {
		for {
			if err := ping.Wait(ctx, 1); err != nil {
				echoed <- nil // the benchmark is over
				return
			}
			if err := t.SubmitImm(fabric.ImmWrite{Imm: 2, Dst: backDesc}, fabric.Completion{}); err != nil {
				echoed <- err
				return
			}
		}
	}()
	req := fabric.ImmWrite{Imm: 1, Dst: desc}
	b.ReportAllocs()
	for b.Loop() {
		if err := a.SubmitImm(req, fabric.Completion{}); err != nil {
			b.Fatal(err)
		}
		if err := pong.Wait(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
	cancel()
	if err := <-echoed; err != nil {
		b.Fatal(err)
	}
}

func mustAlloc(b *testing.B) *fabric.HostBuffer {
	buf, err := fabric.AllocHost(1 << 16)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = buf.Free() })
	return buf
}
