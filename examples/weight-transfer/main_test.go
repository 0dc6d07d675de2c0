package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/job/jobtest"
)

// The program as a user runs it: trainers and inference ranks as
// processes over shm and tcp (a dense and an MoE layout), and as
// goroutines over mem. Every inference rank checks every weight it holds
// after every update (a wrong one exits 3).
func TestWeightTransfer(t *testing.T) {
	exe := jobtest.Build(t)
	dense := []string{"-model", "dense", "-layers", "2", "-hidden", "128", "-ffn", "384", "-vocab", "1000"}
	moe := []string{"-model", "k2", "-shrink", "256", "-layers", "3", "-experts", "16"}
	for _, tc := range []struct {
		provider, launch string
		trainers, infer  int
		shape            []string
	}{
		{"shm", "spawn", 2, 1, dense},
		{"tcp", "spawn", 1, 2, moe},
		{"mem", "inproc", 3, 2, moe},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			args := append([]string{"-provider", tc.provider, "-launch", tc.launch, "-updates", "2",
				"-trainers", fmt.Sprint(tc.trainers), "-inference", fmt.Sprint(tc.infer)}, tc.shape...)
			res := jobtest.Run(t, exe, args...)
			res.RequireOK(t, tc.trainers+tc.infer)
			out := res.Results(t)
			if len(out["update_ms"].([]any)) != 2 || out["best_ms"].(float64) <= 0 {
				t.Errorf("results: %v", out)
			}
			// Every inference rank receives its whole share of the model.
			var got float64
			for _, rr := range out["ranks"].([]any) {
				if rr := rr.(map[string]any); rr["role"] == "inference" {
					got += rr["bytes"].(float64)
				}
			}
			if got != out["bytes"].(float64) || got == 0 {
				t.Errorf("inference ranks received %v bytes of %v", got, out["bytes"])
			}
			if !strings.Contains(res.Stdout, "every weight verified") {
				t.Errorf("stdout:\n%s", res.Stdout)
			}
		})
	}
}

// The schedule, applied by hand to plain memory, writes every weight of
// every inference rank exactly once and with the right value, for shardings
// that divide evenly and ones that do not.
func TestPlanCoversEveryWeight(t *testing.T) {
	shapes := []shape{
		{Layers: 2, Hidden: 24, FFN: 40, Vocab: 50},
		{Layers: 2, Hidden: 16, Experts: 6, ExpertFFN: 8, Shared: 1, Vocab: 33},
	}
	for _, s := range shapes {
		for _, tr := range []int{1, 3} {
			for _, in := range []int{1, 2, 4} {
				checkPlan(t, s, tr, in)
			}
		}
	}
}

func checkPlan(t *testing.T, s shape, trainers, infer int) {
	t.Helper()
	ts := s.tensors()
	src := make([][]byte, trainers)
	for k := range src {
		lay := trainerLayout(ts, k, trainers)
		src[k] = make([]byte, lay.Size)
		for x, tn := range ts {
			r0, r1 := trainerRows(tn, k, trainers)
			fillRows(src[k][lay.Offset[x]:], tn, x, r0, r1, 7)
		}
	}
	dst := make([][]byte, infer)
	writes := make([][]int, infer) // how often each byte was written
	descs := make([]fabric.Descriptor, infer)
	for i := range dst {
		dst[i] = make([]byte, inferLayout(ts, i, infer).Size)
		writes[i] = make([]int, len(dst[i]))
		descs[i] = fabric.Descriptor{Base: uint64(i), Length: uint64(len(dst[i]))} // Base names the rank here
	}
	put := func(k int, d fabric.Descriptor, srcOff, dstOff, n uint64) {
		i := int(d.Base)
		copy(dst[i][dstOff:dstOff+n], src[k][srcOff:srcOff+n])
		for b := dstOff; b < dstOff+n; b++ {
			writes[i][b]++
		}
	}
	p := plan(ts, trainers, descs)
	imms := make([]int, infer)
	for k := range trainers {
		for _, tg := range p.Scatter[k] {
			put(k, tg.Dst, tg.SrcOffset, tg.DstOffset, tg.Length)
			imms[tg.Dst.Base]++
		}
		for _, pw := range p.Paged[k] {
			for j := range pw.SrcPages {
				put(k, pw.Dst, pw.SrcOffset+pw.SrcStride*uint64(pw.SrcPages[j]), pw.DstOffset+pw.DstStride*uint64(pw.DstPages[j]), pw.Length)
				imms[pw.Dst.Base]++
			}
		}
	}
	for i := range infer {
		if imms[i] != p.Expect[i] {
			t.Errorf("%+v T=%d I=%d: rank %d gets %d pieces, schedule expects %d", s, trainers, infer, i, imms[i], p.Expect[i])
		}
		lay := inferLayout(ts, i, infer)
		for x, tn := range ts {
			r0, r1, c0, c1 := inferBlock(tn, i, infer)
			if row, col, ok := checkBlock(dst[i][lay.Offset[x]:], x, r0, r1, c0, c1, 7); !ok {
				t.Fatalf("%+v T=%d I=%d: rank %d %s [%d,%d] wrong", s, trainers, infer, i, tn.Name, row, col)
			}
			n := (r1 - r0) * (c1 - c0) * elem
			for b := lay.Offset[x]; b < lay.Offset[x]+n; b++ {
				if writes[i][b] != 1 {
					t.Fatalf("%+v T=%d I=%d: rank %d %s byte %d written %d times", s, trainers, infer, i, tn.Name, b-lay.Offset[x], writes[i][b])
				}
			}
		}
	}
}

// The check finds a stale version and a single wrong element.
func TestCheckBlock(t *testing.T) {
	tn := tensor{Rows: 4, Cols: 10}
	b := make([]byte, 4*10*elem)
	fillRows(b, tn, 3, 0, 4, 1)
	if _, _, ok := checkBlock(b, 3, 0, 4, 0, 10, 2); ok {
		t.Error("version 1 passes as version 2")
	}
	b[2*10*elem+6] ^= 1
	if row, col, ok := checkBlock(b, 3, 0, 4, 0, 10, 1); ok || row != 2 || col != 3 {
		t.Errorf("flipped element [2,3]: check says [%d,%d] ok=%v", row, col, ok)
	}
}
