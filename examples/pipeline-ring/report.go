package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ferryrdma/ferry/fabric/job"
)

// decodeResult is one rank's view of one decode mode.
type decodeResult struct {
	Mode   string          `json:"mode"`
	Times  []time.Duration `json:"times_ns,omitempty"` // rank 0: each step
	Tokens []int           `json:"tokens,omitempty"`   // the tokens this rank saw
}

type decodeSummary struct {
	Mode      string      `json:"mode"`
	Tokens    int         `json:"tokens"`
	HopBytes  int         `json:"hop_bytes"`
	PerToken  job.Summary `json:"per_token"`
	TokensPer float64     `json:"tokens_per_s"`
}

type results struct {
	PrefillMs     float64         `json:"prefill_ms"`
	StageMs       float64         `json:"stage_compute_ms"` // summed over ranks (pipeline) or rank 0's (tp)
	Overlap       float64         `json:"overlap"`          // pipeline: stage compute sum / prefill time
	ChunkBytes    int             `json:"chunk_bytes"`
	Decode        []decodeSummary `json:"decode"`
	Checksum      uint64          `json:"prefill_checksum"`
	TokensChecked int             `json:"tokens_checked"`
}

// check compares every rank's tokens and checksum with the reference.
func check(c config, all []outcome) (uint64, int, error) {
	sum, ref := c.model().reference(c.Prompt, c.Chunk, c.Tokens)
	checked := 0
	for rank, o := range all {
		// The last rank of a pipeline, and every rank of -tp, saw the
		// prefill's final activations.
		if (c.TP || rank == c.Ranks-1) && o.Prefill.Checksum != sum {
			return 0, 0, job.Mismatch("rank %d: prefill output checksum %#x, the reference's %#x", rank, o.Prefill.Checksum, sum)
		}
		for _, t := range o.First {
			if t != ref[0] {
				return 0, 0, job.Mismatch("rank %d: first token %d, the reference's %d", rank, t, ref[0])
			}
		}
		for _, d := range o.Decode {
			if len(d.Tokens) == 0 {
				continue // a middle rank of the relay ring never sees tokens
			}
			if !slices.Equal(d.Tokens, ref[1:]) {
				return 0, 0, job.Mismatch("rank %d %s: tokens %v, the reference's %v", rank, d.Mode, d.Tokens, ref[1:])
			}
			checked += len(d.Tokens)
		}
	}
	return sum, checked, nil
}

func report(ctx context.Context, r *job.Rank, c config, mine outcome) error {
	all, err := job.Gather(ctx, r, mine)
	if err != nil || r.ID != 0 {
		return err
	}
	var res results
	if res.Checksum, res.TokensChecked, err = check(c, all); err != nil {
		return err
	}
	pre := all[0].Prefill
	res.PrefillMs, res.ChunkBytes = float64(pre.Elapsed)/1e6, pre.HopBytes
	if c.TP {
		res.StageMs = float64(pre.Compute) / 1e6
	} else {
		for _, o := range all {
			res.StageMs += float64(o.Prefill.Compute) / 1e6
		}
		res.Overlap = res.StageMs / res.PrefillMs
	}
	for _, d := range all[0].Decode {
		s := decodeSummary{Mode: d.Mode, Tokens: len(d.Times), HopBytes: 2 * c.Hidden, PerToken: job.Summarize(slices.Clone(d.Times))}
		s.TokensPer = 1e6 / s.PerToken.Mean
		res.Decode = append(res.Decode, s)
	}

	w := r.Out
	if c.TP {
		fmt.Fprintf(w, "model: %d layers, hidden %d, tensor parallel over %d ranks: 2 all-reduces of %s per layer and token\n",
			c.Layers, c.Hidden, c.Ranks, job.FormatSize(int64(2*c.Hidden)))
		fmt.Fprintf(w, "prefill: %d tokens in chunks of %d (all-reduces of %s): first token after %.2f ms, %.2f ms of it compute\n",
			c.Prompt, c.Chunk, job.FormatSize(int64(res.ChunkBytes)), res.PrefillMs, res.StageMs)
	} else {
		var stages []string
		for k := range c.Ranks {
			stages = append(stages, fmt.Sprintf("%d-%d", k*c.Layers/c.Ranks, (k+1)*c.Layers/c.Ranks-1))
		}
		fmt.Fprintf(w, "model: %d layers, hidden %d, over %d ranks (layers %s); a decode hop is %s\n",
			c.Layers, c.Hidden, c.Ranks, strings.Join(stages, " | "), job.FormatSize(int64(2*c.Hidden)))
		fmt.Fprintf(w, "prefill: %d tokens in chunks of %d (%s per hop): first token after %.2f ms; the stages computed %.2f ms in all: overlap %.2fx\n",
			c.Prompt, c.Chunk, job.FormatSize(int64(res.ChunkBytes)), res.PrefillMs, res.StageMs, res.Overlap)
	}
	t := job.NewTable(w, "decode", "tokens", "per-token p50 us", "p99 us", "min us", "tokens/s")
	for _, d := range res.Decode {
		t.Row(d.Mode, fmt.Sprint(d.Tokens), formatUs(d.PerToken.P50), formatUs(d.PerToken.P99), formatUs(d.PerToken.Min), fmt.Sprintf("%.0f", d.TokensPer))
	}
	_ = t.Flush()
	if c.TP {
		fmt.Fprintf(w, "per all-reduce (p50 token / %d): %.1f us\n", 2*c.Layers, res.Decode[0].PerToken.P50/float64(2*c.Layers))
	}
	fmt.Fprintf(w, "verified: the prefill's output checksum and %d decoded tokens match a single-process run\n", res.TokensChecked)
	return r.Emit(program, c, res)
}

// reportProbe prints the matrices (rank 0).
func reportProbe(ctx context.Context, r *job.Rank, c config, mine []probeResult) error {
	all, err := job.Gather(ctx, r, mine)
	if err != nil || r.ID != 0 {
		return err
	}
	lat := make([][]float64, c.Ranks)
	bw := make([][]float64, c.Ranks)
	for i := range c.Ranks {
		lat[i], bw[i] = make([]float64, c.Ranks), make([]float64, c.Ranks)
	}
	for from, rs := range all {
		to := 0
		for _, p := range rs {
			if to == from {
				to++
			}
			lat[from][to], bw[from][to] = p.LatencyUs, p.GBps
			to++
		}
	}
	headers := []string{"from\\to"}
	for j := range c.Ranks {
		headers = append(headers, fmt.Sprint(j))
	}
	for _, m := range []struct {
		title  string
		values [][]float64
		format string
	}{{"latency, us (half the median round trip of a zero-byte write)", lat, "%.1f"},
		{fmt.Sprintf("bandwidth, GB/s (bursts of %d writes of %s)", probeBurst, job.FormatSize(int64(c.ProbeBytes))), bw, "%.2f"}} {
		fmt.Fprintln(r.Out, m.title)
		t := job.NewTable(r.Out, headers...)
		for i := range c.Ranks {
			row := []string{fmt.Sprint(i)}
			for j := range c.Ranks {
				if i == j {
					row = append(row, "-")
				} else {
					row = append(row, fmt.Sprintf(m.format, m.values[i][j]))
				}
			}
			t.Row(row...)
		}
		_ = t.Flush()
	}
	fmt.Fprintln(r.Out, "verified: every burst's bytes checked at its target")
	return r.Emit(program, c, map[string]any{"latency_us": lat, "gbps": bw})
}
