package host_test

import (
	"testing"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
)

// TestHostWireBytes checks that each phase's fabric writes carry its rows
// at their own size: dispatch rows (token and scales) smaller than the
// combine rows, and larger, both move exactly rows times the phase's row
// (its nominal bytes padded to 16), never the buffers' larger stride.
// Results are checked against the oracle too.
func TestHostWireBytes(t *testing.T) {
	for name, cfg := range map[string]a2a.Config{
		// 64 fp8 + 2 scales: 80-byte dispatch rows, 128-byte bf16 combine rows.
		"fp8-bf16": {WorldSize: 2, NVLinkSize: 1, MaxTokens: 8, Hidden: 64, Scales: 2,
			DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 3},
		// 32 fp32: 128-byte dispatch rows, 64-byte bf16 combine rows.
		"fp32-bf16": {WorldSize: 3, NVLinkSize: 1, NICsPerGPU: 2, MaxTokens: 8, Hidden: 32,
			DispatchType: a2a.FP32, CombineType: a2a.BF16, Experts: 6, ExpertsPerToken: 2},
	} {
		t.Run(name, func(t *testing.T) {
			l, err := cfg.Layout()
			if err != nil {
				t.Fatal(err)
			}
			ctxs, backends := worldBackends(t, cfg, "mem")
			a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs}, 5, 3)
			for r, b := range backends {
				for _, c := range []struct {
					tag a2a.Tag
					row int
				}{{a2a.TagDispatch, l.DispatchRow}, {a2a.TagCombine, l.CombineRow}} {
					tr := b.Traffic(c.tag)
					if tr.Rows == 0 {
						t.Fatalf("rank %d: no %v row crossed the fabric", r, c.tag)
					}
					if want := tr.Rows * uint64(c.row); tr.Bytes != want {
						t.Errorf("rank %d: %v writes carried %d bytes for %d rows of %d bytes (%d); buffer stride %d",
							r, c.tag, tr.Bytes, tr.Rows, c.row, want, l.Stride())
					}
				}
			}
		})
	}
}
