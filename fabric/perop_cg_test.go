package fabric_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/ferryrdma/ferry/fabric"
)

// TestPerOpInstructions drives the per-operation path (submit, accept,
// post, poll, completion, counter) over the null provider from inside the
// main worker's goroutine, with no idle passes, so that an instruction
// counter sees only that path: scripts/perop-cg.sh runs it under valgrind
// callgrind with collection on in perOpMeasure alone and divides by the
// operations. FERRY_PEROP_CG picks the case: imm (immediate-only writes,
// 256 in flight), imm1 (one at a time, a pass each), paged100 or paged10000 (64 B pages, 4 requests in
// flight), idle (1000 empty passes a round); FERRY_PEROP_N the number of
// rounds.
func TestPerOpInstructions(t *testing.T) {
	mode := os.Getenv("FERRY_PEROP_CG")
	if mode == "" {
		t.Skip("instruction-count harness: set FERRY_PEROP_CG=imm|imm1|paged100|paged10000|idle (scripts/perop-cg.sh)")
	}
	rounds, _ := strconv.Atoi(os.Getenv("FERRY_PEROP_N"))
	if rounds <= 0 {
		rounds = 20
	}
	warm := rounds
	if v, err := strconv.Atoi(os.Getenv("FERRY_PEROP_WARM")); err == nil {
		warm = v
	}
	a, _, src, desc := perOpPair(t)
	tc := new(fabric.TransferCounter)
	var round func()
	var done int64
	switch mode {
	case "imm1", "imm":
		// imm drives the worker once per 256 requests; imm1 once per
		// request, as a worker that keeps up with its submitter does in
		// BenchmarkNullImm, so each pass's fixed costs fall on one request.
		req := fabric.ImmWrite{Imm: 1, Dst: desc}
		perPass := int64(256)
		if mode == "imm1" {
			perPass = 1
		}
		round = func() {
			for i := int64(1); i <= 256; i++ {
				if err := a.SubmitImm(req, fabric.Count(tc)); err != nil {
					t.Error(err)
					return
				}
				if i%perPass == 0 {
					done += perPass
					for tc.Done() < done {
						fabric.PerOpPass(a)
					}
				}
			}
		}
	case "paged100", "paged10000":
		pages := 100
		if mode == "paged10000" {
			pages = 10000
		}
		idx := make([]uint32, pages)
		for i := range idx {
			idx[i] = uint32(i % 1000)
		}
		req := fabric.PagedWrite{Src: src, SrcPages: idx, SrcStride: 64, Dst: desc, DstPages: idx, DstStride: 64, Length: 64}
		round = func() {
			for i := 0; i < 4; i++ {
				if err := a.SubmitPaged(req, fabric.Count(tc)); err != nil {
					t.Error(err)
					return
				}
			}
			done += 4
			for tc.Done() < done {
				fabric.PerOpPass(a)
			}
		}
	case "idle":
		// An empty pass, as a spinning worker makes between ops.
		round = func() {
			for i := 0; i < 1000; i++ {
				fabric.PerOpPass(a)
			}
		}
	default:
		t.Fatalf("FERRY_PEROP_CG=%q: want imm, imm1, paged100, paged10000 or idle", mode)
	}
	fabric.PerOpOnWorker(a, func() {
		perOpWarm(round, warm)
		perOpMeasure(round, rounds)
	})
	if tc.Errors() != 0 {
		t.Fatalf("%d transfers failed: %v", tc.Errors(), tc.Err())
	}
	t.Logf("%s: %d rounds measured, %d transfers in all", mode, rounds, tc.Done())
}

//go:noinline
func perOpWarm(round func(), n int) {
	for i := 0; i < n; i++ {
		round()
	}
}

// perOpMeasure is the window callgrind counts (--toggle-collect).
//
//go:noinline
func perOpMeasure(round func(), n int) {
	for i := 0; i < n; i++ {
		round()
	}
}

// perOpPair opens a writer and a target over the null provider, as
// benchPair does, the writer polling adaptively (its loop is parked in
// PerOpOnWorker while counted).
func perOpPair(t *testing.T) (a *fabric.Engine, tgt *fabric.Engine, src *fabric.MemoryRegion, desc fabric.Descriptor) {
	t.Helper()
	open := func() *fabric.Engine {
		e, err := fabric.Open(context.Background(), fabric.Config{Transport: "null", Poll: fabric.PollAdaptive})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close(context.Background()) })
		return e
	}
	a, tgt = open(), open()
	buf, err := fabric.AllocHost(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = buf.Free() })
	src, err = a.RegisterHost(buf, fabric.AccessLocal)
	if err != nil {
		t.Fatal(err)
	}
	dr, err := tgt.RegisterHost(buf, fabric.AccessRemoteWrite)
	if err != nil {
		t.Fatal(err)
	}
	desc, _ = dr.Descriptor()
	return
}
