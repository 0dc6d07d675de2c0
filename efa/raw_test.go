//go:build cgo

package efa

import (
	"errors"
	"testing"

	"github.com/ferryrdma/ferry/fabric/rdma"
	"github.com/ferryrdma/ferry/internal/testutil"
)

func TestRawBench(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr testTransport) {
		for _, spec := range []RawSpec{
			{Size: 1 << 20, Iters: 3, Warmup: 1, Imm: true},
			{Size: 4096, Pages: 3000, Iters: 2, Warmup: 1, Imm: true},
			{Size: 64, Pages: 100, Iters: 3},
			{Size: 0, Pages: 10, Iters: 2, Imm: true},
			// An engine case's layout: pages scattered over a span.
			{Size: 64, Pages: 4, Iters: 2, Offsets: []uint64{1 << 20, 64, 3 << 16, 8<<20 - 64}, Span: 8 << 20},
			{Size: 1 << 20, Iters: 2, Offsets: []uint64{4096}, Span: 2 << 20},
		} {
			spec.Transport, spec.Node = tr.name, tr.node
			res, err := RawBench(spec)
			if errors.Is(err, rdma.ErrNotSupported) {
				testutil.Skip(t, "libfabric", "%s cannot run here: %v", tr.name, err)
			}
			if err != nil {
				t.Fatalf("%+v: %v", spec, err)
			}
			if len(res.Latency) != spec.Iters || res.Ops != max(spec.Pages, 1) || res.Bytes != uint64(res.Ops)*spec.Size {
				t.Fatalf("%+v: result %+v", spec, res)
			}
			t.Logf("%s size %d pages %d imm %v: p50 %v mean %v sd %v, %.2f GB/s, %.0f ops/s",
				res.Provider, spec.Size, spec.Pages, spec.Imm, res.Median(), res.Mean(), res.Stddev(), res.GBps(), res.OpsPerSec())
		}
	})
}

func TestRawBenchBadSpec(t *testing.T) {
	for _, spec := range []RawSpec{
		{Size: 64, Iters: 1},
		{Transport: "shm", Size: 0, Iters: 1},
		{Transport: "shm", Size: 64, Iters: 0},
		{Transport: "shm", Size: 64, Iters: 1, Pages: -1},
		{Transport: "shm", Size: 1 << 30, Pages: 1 << 10, Iters: 1},
		{Transport: "shm", Size: 64, Pages: 2, Iters: 1, Offsets: []uint64{0}, Span: 4096},
		{Transport: "shm", Size: 64, Pages: 1, Iters: 1, Offsets: []uint64{4096 - 63}, Span: 4096},
		{Transport: "shm", Size: 64, Iters: 1, Offsets: []uint64{0}, Span: 32 << 30},
	} {
		if _, err := RawBench(spec); !errors.Is(err, rdma.ErrInvalidArgument) {
			t.Errorf("RawBench(%+v) = %v, want ErrInvalidArgument", spec, err)
		}
	}
}
