package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ferryrdma/ferry/fabric/job"
)

// describe prints the model and the schedule (rank 0).
func describe(r *job.Rank, c config, ts []tensor, s schedule) {
	n := params(ts)
	name := c.Model
	if c.Shrink > 1 {
		name = fmt.Sprintf("%s with widths / %d", c.Model, c.Shrink)
	}
	fmt.Fprintf(r.Out, "model: %s: %d layers, hidden %d, %d tensors, %.1fM parameters, %s in bf16\n",
		name, c.Shape.Layers, c.Shape.Hidden, len(ts), float64(n)/1e6, job.FormatSize(2*n))
	if c.Shrink > 1 {
		full := presets[c.Model]
		full.Layers = c.Shape.Layers
		fmt.Fprintf(r.Out, "  (the same layout at full width: %.3gT parameters)\n", float64(params(full.tensors()))/1e12)
	}
	targets, paged, pages := 0, 0, 0
	for k := range s.Scatter {
		targets += len(s.Scatter[k])
		paged += len(s.Paged[k])
		for _, p := range s.Paged[k] {
			pages += len(p.SrcPages)
		}
	}
	fmt.Fprintf(r.Out, "schedule: %d trainers -> %d inference ranks; per update %d scatter targets in %d scatters, %d paged writes of %d pages; pieces per inference rank %v\n",
		c.Trainers, c.Inference, targets, c.Trainers, paged, pages, s.Expect)
}

// outcome is one rank's timings.
type outcome struct {
	Times []time.Duration `json:"times_ns"`
}

type rankResult struct {
	Rank    int     `json:"rank"`
	Role    string  `json:"role"`
	Bytes   int64   `json:"bytes"`
	P50     float64 `json:"p50_ms"`
	Best    float64 `json:"best_ms"`
	GBps    float64 `json:"gbps_p50"`
	Updates []int64 `json:"times_ns"`
}

type results struct {
	Params  int64        `json:"params"`
	Bytes   int64        `json:"bytes"`
	Updates []float64    `json:"update_ms"` // per update: the slowest inference rank
	Best    float64      `json:"best_ms"`
	P50     float64      `json:"p50_ms"`
	GBps    float64      `json:"gbps_best"`
	GBpsP50 float64      `json:"gbps_p50"`
	Ranks   []rankResult `json:"ranks"`
}

func report(ctx context.Context, r *job.Rank, c config, s schedule, times []time.Duration) error {
	all, err := job.Gather(ctx, r, outcome{Times: times})
	if err != nil || r.ID != 0 {
		return err
	}
	ts := c.Shape.tensors()
	res := results{Params: params(ts)}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	// An update is done when its slowest inference rank has its last
	// trainer's notification.
	update := make([]time.Duration, c.Updates)
	for rank, o := range all {
		rr := rankResult{Rank: rank, Role: "trainer"}
		if rank >= c.Trainers {
			rr.Role = "inference"
			for u, d := range o.Times {
				update[u] = max(update[u], d)
			}
		}
		for k := range c.Trainers {
			for i := range c.Inference {
				if (rank < c.Trainers && k == rank) || (rank >= c.Trainers && i == rank-c.Trainers) {
					rr.Bytes += s.Bytes[k][i]
				}
			}
		}
		for _, d := range o.Times {
			rr.Updates = append(rr.Updates, int64(d))
		}
		sorted := slices.Sorted(slices.Values(o.Times))
		rr.P50, rr.Best = ms(sorted[len(sorted)/2]), ms(sorted[0])
		rr.GBps = float64(rr.Bytes) / sorted[len(sorted)/2].Seconds() / 1e9
		res.Ranks = append(res.Ranks, rr)
	}
	for k := range c.Trainers {
		for i := range c.Inference {
			res.Bytes += s.Bytes[k][i]
		}
	}
	for _, d := range update {
		res.Updates = append(res.Updates, ms(d))
	}
	sorted := slices.Sorted(slices.Values(update))
	res.Best, res.P50 = ms(sorted[0]), ms(sorted[len(sorted)/2])
	res.GBps = float64(res.Bytes) / sorted[0].Seconds() / 1e9
	res.GBpsP50 = float64(res.Bytes) / sorted[len(sorted)/2].Seconds() / 1e9

	t := job.NewTable(r.Out, "rank", "role", "bytes", "p50 ms", "best ms", "GB/s (p50)")
	for _, rr := range res.Ranks {
		t.Row(fmt.Sprint(rr.Rank), rr.Role, job.FormatSize(rr.Bytes), fmt.Sprintf("%.2f", rr.P50), fmt.Sprintf("%.2f", rr.Best), fmt.Sprintf("%.2f", rr.GBps))
	}
	_ = t.Flush()
	fmt.Fprintln(r.Out, "trainer: from the start line until its writes completed locally; inference: until its last trainer's notification")
	fmt.Fprintf(r.Out, "update of %s (%d updates): best %.2f ms (%.2f GB/s), p50 %.2f ms (%.2f GB/s); every weight verified on every inference rank\n",
		job.FormatSize(res.Bytes), c.Updates, res.Best, res.GBps, res.P50, res.GBpsP50)
	return r.Emit(program, c, res)
}
