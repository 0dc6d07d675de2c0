package host_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	"github.com/ferryrdma/ferry/fabric"
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

// TestHostLentMappings: over ipc, which lends its mappings of peers'
// receive buffers, a rank's first writes with rows map them and every
// later iteration stores the rows there directly, its writes carrying no
// rows (only the immediates); the results still match the oracle, self
// copies (taken from the caller's input) included. Every token goes to
// every rank (one expert each, top-3), so a rank's first dispatch with
// tokens writes to all its peers. Every signal and count row of those
// iterations goes to the peers' doorbells, none through the engine.
func TestHostLentMappings(t *testing.T) {
	cfg := a2a.Config{WorldSize: 3, NVLinkSize: 1, MaxTokens: 8, Hidden: 64, Scales: 2,
		DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 3, ExpertsPerToken: 3, PrivateTokens: 2}
	if _, err := fabric.ChooseTransport("ipc", fabric.DomainOptions{}); err != nil {
		if errors.Is(err, fabric.ErrNotSupported) || errors.Is(err, fabric.ErrUnknownProvider) {
			t.Skipf("needs the ipc transport (Linux shared memory): %v", err)
		}
		t.Fatal(err)
	}
	ctxs, backends := worldBackends(t, cfg, "ipc")
	mapped := func() bool {
		for _, b := range backends {
			if b.Traffic(a2a.TagDispatch).Rows == 0 {
				return false
			}
		}
		return true
	}
	for seed := uint64(20); !mapped(); seed++ {
		if seed == 40 {
			t.Fatal("20 iterations and some rank never wrote a dispatch row through the engine")
		}
		a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs}, seed, 1)
	}
	first := make([][2]a2a.Traffic, len(backends))
	routes, bells := make([]uint64, len(backends)), make([]uint64, len(backends))
	for r, b := range backends {
		first[r] = [2]a2a.Traffic{b.Traffic(a2a.TagDispatch), b.Traffic(a2a.TagCombine)}
		routes[r], bells[r] = b.Traffic(a2a.TagRoute).Bytes, b.Doorbells()
	}
	const iters = 4
	a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs}, 12, iters)
	for r, b := range backends {
		// Every signal goes to the peers' doorbells: per iteration and
		// peer a count row, the dispatch and the combine signal, two
		// barriers; the count rows are stored, not written. The last
		// combine barrier runs in the background (its signals may come
		// before or after either count is read).
		others := uint64(cfg.WorldSize - 1)
		if n, want := b.Doorbells()-bells[r], uint64(iters)*5*others; n+others < want || n > want+others {
			t.Errorf("rank %d: %d signals went to doorbells in %d iterations, want %d (± %d)", r, n, iters, want, others)
		}
		if n := b.Traffic(a2a.TagRoute).Bytes - routes[r]; n != 0 {
			t.Errorf("rank %d: count rows carried %d bytes through the engine once the peers' tables were lent", r, n)
		}
		for i, tag := range []a2a.Tag{a2a.TagDispatch, a2a.TagCombine} {
			if tr := b.Traffic(tag); tr.Rows != first[r][i].Rows || tr.Bytes != first[r][i].Bytes {
				t.Errorf("rank %d: %v writes carried %d more rows (%d more bytes) once the peers' buffers were lent",
					r, tag, tr.Rows-first[r][i].Rows, tr.Bytes-first[r][i].Bytes)
			}
		}
	}
}

// TestHostSharedTokens: where a rank stores its rows straight into a
// receiver's buffer (a node peer's, or one ipc lends), each token bound
// for that receiver is stored once and its copies refer to it (top-4 of 8
// experts over 2 or 4 ranks: a token goes to about two experts of each).
// Results match the oracle, in single-rank domains, a domain of two, and
// two domains of two (node peers and lent buffers at once).
func TestHostSharedTokens(t *testing.T) {
	if _, err := fabric.ChooseTransport("ipc", fabric.DomainOptions{}); err != nil {
		if errors.Is(err, fabric.ErrNotSupported) || errors.Is(err, fabric.ErrUnknownProvider) {
			t.Skipf("needs the ipc transport (Linux shared memory): %v", err)
		}
		t.Fatal(err)
	}
	for name, cfg := range map[string]a2a.Config{
		"W2_S1": {WorldSize: 2, NVLinkSize: 1, MaxTokens: 8, Hidden: 64, Scales: 2, DispatchType: a2a.FP8,
			CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 4, PrivateTokens: 2},
		"W2_S2": {WorldSize: 2, NVLinkSize: 2, MaxTokens: 8, Hidden: 64, Scales: 2, DispatchType: a2a.FP8,
			CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 4, PrivateTokens: 1},
		"W4_S2": {WorldSize: 4, NVLinkSize: 2, MaxTokens: 8, Hidden: 32, DispatchType: a2a.BF16,
			CombineType: a2a.FP32, Experts: 8, ExpertsPerToken: 4, PrivateTokens: 2},
	} {
		t.Run(name, func(t *testing.T) {
			ctxs, backends := worldBackends(t, cfg, "ipc")
			a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs}, 40, 6)
			for r, b := range backends {
				if host.SharedCopies(b) == 0 {
					t.Errorf("rank %d: no copy went as a reference to a shared token row", r)
				}
			}
		})
	}
}

// TestHostTokenRowsCachedOrStreamed runs shared token rows of 2 KB (long
// enough for rows.Copy to stream them) both ways: with cached stores
// (the budget of half the shared cache is ample for them) and streamed
// (a budget of 0), in a domain of two and in single-rank domains over
// lent buffers. Results match the oracle either way, so the rows are
// published (fenced, where streamed) before the signals that say so.
func TestHostTokenRowsCachedOrStreamed(t *testing.T) {
	if _, err := fabric.ChooseTransport("ipc", fabric.DomainOptions{}); err != nil {
		if errors.Is(err, fabric.ErrNotSupported) || errors.Is(err, fabric.ErrUnknownProvider) {
			t.Skipf("needs the ipc transport (Linux shared memory): %v", err)
		}
		t.Fatal(err)
	}
	for _, nvlink := range []int{2, 1} {
		for _, budget := range []int{1 << 30, 0} {
			cfg := a2a.Config{WorldSize: 2, NVLinkSize: nvlink, MaxTokens: 8, Hidden: 2048, Scales: 4,
				DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 4, PrivateTokens: 2}
			t.Run(fmt.Sprintf("S%d/budget=%d", nvlink, budget), func(t *testing.T) {
				ctxs, backends := worldBackends(t, cfg, "ipc")
				for _, b := range backends {
					host.SetTokenCacheBudget(b, budget)
				}
				a2atest.Run(t, cfg, &a2atest.World{Contexts: ctxs}, 30, 7)
				for r, b := range backends {
					cached, streamed := host.TokenRowIters(b)
					if budget > 0 && (cached == 0 || streamed != 0) {
						t.Errorf("rank %d: ample budget, token rows cached in %d iterations, streamed in %d", r, cached, streamed)
					}
					if budget == 0 && (streamed == 0 || cached != 0) {
						t.Errorf("rank %d: no budget, token rows cached in %d iterations, streamed in %d", r, cached, streamed)
					}
				}
			})
		}
	}
}
