package fabricmetrics

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// histogramOf finds the histogram of family name with label op.
func histogramOf(t *testing.T, fams map[string]*dto.MetricFamily, name, op string) *dto.Histogram {
	t.Helper()
	f, ok := fams[name]
	require.True(t, ok, "no metric %s", name)
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "op" && l.GetValue() == op {
				return m.GetHistogram()
			}
		}
	}
	t.Fatalf("no %s series for op %q", name, op)
	return nil
}

// TestScrapeHistograms: after three single writes of 3000 bytes and two
// immediates, the scrape's latency and size histograms count exactly
// those, per kind, with the sizes in their buckets.
func TestScrapeHistograms(t *testing.T) {
	writer, target := openMem(t, 1), openMem(t, 1)
	reg := prometheus.NewRegistry()
	reg.MustRegister(New(writer, Options{}))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	buf, err := fabric.AllocHost(1 << 16)
	require.NoError(t, err)
	defer buf.Free()
	src, err := writer.RegisterHost(buf, fabric.AccessLocal)
	require.NoError(t, err)
	dst, err := target.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	desc, err := dst.Descriptor()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		tr := fabric.NewTransfer()
		require.NoError(t, writer.SubmitSingle(fabric.SingleWrite{Src: src, Length: 3000, Dst: desc}, fabric.Notify(tr)))
		require.NoError(t, tr.Wait(ctx))
	}
	for range 2 {
		tr := fabric.NewTransfer()
		require.NoError(t, writer.SubmitImm(fabric.ImmWrite{Imm: 3, Dst: desc}, fabric.Notify(tr)))
		require.NoError(t, tr.Wait(ctx))
	}

	fams := scrape(t, srv.URL)
	size := histogramOf(t, fams, "ferry_transfer_size_bytes", "single")
	require.EqualValues(t, 3, size.GetSampleCount())
	require.EqualValues(t, 9000, size.GetSampleSum())
	for _, b := range size.GetBucket() {
		want := uint64(0)
		if b.GetUpperBound() >= 3000 {
			want = 3
		}
		require.Equal(t, want, b.GetCumulativeCount(), "size bucket %v", b.GetUpperBound())
	}
	lat := histogramOf(t, fams, "ferry_transfer_latency_seconds", "single")
	require.EqualValues(t, 3, lat.GetSampleCount())
	require.EqualValues(t, 2, histogramOf(t, fams, "ferry_transfer_latency_seconds", "imm").GetSampleCount())
	require.Zero(t, histogramOf(t, fams, "ferry_transfer_size_bytes", "paged").GetSampleCount())
	for _, m := range fams["ferry_transfer_size_bytes"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "transport" {
				require.Equal(t, "mem", l.GetValue())
			}
		}
	}
}

// BenchmarkObserve compares the cost of counting one transfer in a
// Prometheus client histogram (two Observe calls, latency and size)
// with the engine's own per-worker buckets, measured end to end by
// fabric's BenchmarkNullImm; this is the client's side of the
// comparison.
func BenchmarkObserve(b *testing.B) {
	lat := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "lat", Buckets: prometheus.ExponentialBuckets(1e-6, 2, 24)})
	size := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "size", Buckets: prometheus.ExponentialBuckets(1, 2, 32)})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		lat.Observe(float64(i&1023) * 1e-6)
		size.Observe(float64(i & 65535))
	}
}
