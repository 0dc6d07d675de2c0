package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ferryrdma/ferry/fabric/job"
)

// timeline is one request as the decode saw it.
type timeline struct {
	Req    uint32 `json:"req"`
	Stream bool   `json:"stream"`
	Warmup bool   `json:"warmup"`
	// TTFT: from the request to the last page of the last layer, when the
	// decode can run its first step.
	TTFT time.Duration `json:"ttft_ns"`
	// Arrived: when each layer's last page landed, from the request.
	Arrived []time.Duration `json:"arrived_ns"`
	// Prefill is the prefill's own timing (filled in by rank 0), and
	// Tail = TTFT - Prefill.Compute: what the transfer (and the request's
	// trip) added after the prefill ended.
	Prefill prefillTiming `json:"prefill"`
	Tail    time.Duration `json:"tail_ns"`
	Bytes   int64         `json:"bytes"`
	Pages   int           `json:"pages"`
}

func newTimeline(q request, c config, start time.Time, arrived []time.Time) timeline {
	tl := timeline{Req: q.ID, Stream: q.Stream, Bytes: int64(c.Layers * len(q.Table) * c.pageBytes()), Pages: c.Layers * len(q.Table)}
	for _, a := range arrived {
		tl.Arrived = append(tl.Arrived, a.Sub(start))
	}
	tl.TTFT = slices.Max(tl.Arrived)
	return tl
}

// outcome is what each rank reports at the end; rank 0 merges them.
type outcome struct {
	Prefill []prefillTiming `json:"prefill,omitempty"` // rank 0, per request
	Lines   []timeline      `json:"lines,omitempty"`   // rank 1, per request
}

// modeResult is one -stream setting's summary (medians over its requests).
type modeResult struct {
	Stream      bool    `json:"stream"`
	Requests    int     `json:"requests"`
	TTFT        float64 `json:"ttft_p50_ms"`
	TTFTMin     float64 `json:"ttft_min_ms"`
	Compute     float64 `json:"prefill_compute_p50_ms"`
	Tail        float64 `json:"tail_p50_ms"`
	Transfer    float64 `json:"transfer_p50_ms"`
	Bytes       int64   `json:"kv_bytes"`
	Pages       int     `json:"pages"`
	GBps        float64 `json:"transfer_gbps"` // KV bytes over the transfer time
	PagesPerSec float64 `json:"pages_per_s"`
}

func report(ctx context.Context, r *job.Rank, c config, mine outcome) error {
	all, err := job.Gather(ctx, r, mine)
	if err != nil || r.ID != 0 {
		return err
	}
	lines := all[1].Lines
	if len(all[0].Prefill) != len(lines) {
		return fmt.Errorf("prefill served %d requests, decode made %d", len(all[0].Prefill), len(lines))
	}
	for i := range lines {
		lines[i].Prefill = all[0].Prefill[i]
		lines[i].Tail = max(0, lines[i].TTFT-lines[i].Prefill.Compute)
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	p50 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	var results []modeResult
	for _, stream := range c.Modes {
		var ttft, comp, tail, xfer []time.Duration
		m := modeResult{Stream: stream}
		for _, tl := range lines {
			if tl.Warmup || tl.Stream != stream {
				continue
			}
			ttft, comp, tail, xfer = append(ttft, tl.TTFT), append(comp, tl.Prefill.Compute), append(tail, tl.Tail), append(xfer, tl.Prefill.Transfer)
			m.Bytes, m.Pages = tl.Bytes, tl.Pages
		}
		x := p50(xfer)
		m.Requests, m.TTFT, m.TTFTMin = len(ttft), ms(p50(ttft)), ms(slices.Min(ttft))
		m.Compute, m.Tail, m.Transfer = ms(p50(comp)), ms(p50(tail)), ms(x)
		m.GBps, m.PagesPerSec = float64(m.Bytes)/x.Seconds()/1e9, float64(m.Pages)/x.Seconds()
		results = append(results, m)
	}

	fmt.Fprintf(r.Out, "kv cache: %d layers x %d pages of %s (%d tokens x %d kv heads x %d x %d B, K and V), %s per request; prefill compute %v per layer\n",
		c.Layers, c.blocks(), job.FormatSize(int64(c.pageBytes())), c.PageTokens, c.KVHeads, c.HeadDim, c.DtypeBytes,
		job.FormatSize(int64(c.Layers*c.blocks()*c.pageBytes())), c.LayerTime)
	t := job.NewTable(r.Out, "stream", "requests", "TTFT p50 ms", "TTFT min ms", "= compute ms", "+ tail ms", "transfer ms", "GB/s", "pages/s")
	for _, m := range results {
		t.Row(fmt.Sprint(m.Stream), fmt.Sprint(m.Requests), fmt.Sprintf("%.2f", m.TTFT), fmt.Sprintf("%.2f", m.TTFTMin),
			fmt.Sprintf("%.2f", m.Compute), fmt.Sprintf("%.2f", m.Tail), fmt.Sprintf("%.2f", m.Transfer),
			rate("%.2f", m.GBps), rate("%.0f", m.PagesPerSec))
	}
	_ = t.Flush()
	if len(results) == 2 {
		fmt.Fprintf(r.Out, "streaming cuts the time to first token %.2fx (p50 %.2f -> %.2f ms); every page verified\n",
			results[0].TTFT/results[1].TTFT, results[0].TTFT, results[1].TTFT)
	} else {
		fmt.Fprintln(r.Out, "every page verified")
	}
	fmt.Fprintln(r.Out, "TTFT = prefill compute + tail (what the transfer and the request's trip add after the compute); transfer: time")
	fmt.Fprintln(r.Out, "some layer's write was in flight at the prefill, which GB/s and pages/s divide by (streamed layers wait for compute)")
	return r.Emit(program, c, struct {
		Modes    []modeResult `json:"modes"`
		Requests []timeline   `json:"requests"`
	}{results, lines})
}

// rate formats a rate, or "-" when the transfer took no measurable time.
func rate(format string, v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}
