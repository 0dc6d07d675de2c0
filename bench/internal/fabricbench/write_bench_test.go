package fabricbench

import (
	"context"
	"testing"
	"time"
)

// BenchmarkNullPaged64 is the engine figure through this
// package's own loop: paged writes of 64 B x 10000 pages over the null
// provider, which completes every write at once, reported in Mops over
// the timed iterations (the target is at least 12 per worker).
func BenchmarkNullPaged64(b *testing.B) {
	ctx := context.Background()
	s := Spec{Provider: "null", Buffer: 8 << 20}.WithDefaults()
	w, err := OpenSide(ctx, s)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	t, err := OpenSide(ctx, s)
	if err != nil {
		b.Fatal(err)
	}
	defer t.Close()
	c := Case{Workload: Paged, Bytes: 64, Pages: 10000, Iters: 50, Warmup: 5}
	j := Job{Case: c, Dst: t.Desc, Seed: 1, Span: s.Buffer}
	b.ReportAllocs()
	var total time.Duration
	for b.Loop() {
		lat, err := w.Write(ctx, j)
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range lat {
			total += l
		}
	}
	b.ReportMetric(float64(b.N)*float64(c.Iters*c.Pages)/total.Seconds()/1e6, "Mops")
}
