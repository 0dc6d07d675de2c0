package fabricmetrics

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/fabrictest"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openMem(t *testing.T, nics int) *fabric.Engine {
	t.Helper()
	ctx := context.Background()
	e, err := fabric.Open(ctx, fabric.Config{Transport: fabrictest.Mem, NICs: nics, Logger: quiet()})
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		require.NoError(t, e.Close(cctx))
	})
	return e
}

// scrape fetches url over HTTP and parses the text exposition.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// sum adds the values of a family over the metrics whose labels include
// want.
func sum(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f, ok := fams[name]
	require.True(t, ok, "no metric %s", name)
	var total float64
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		}
	}
	return total
}

// Two engines over the in-process transport, one good write and one the
// writer's NIC fails: the scrape over loopback HTTP shows both, per
// engine and per NIC.
func TestScrapeOverLoopback(t *testing.T) {
	ctx := context.Background()
	writer, target := openMem(t, 2), openMem(t, 2)
	reg := prometheus.NewRegistry()
	reg.MustRegister(New(writer, Options{ConstLabels: prometheus.Labels{"engine": "writer"}}))
	reg.MustRegister(New(target, Options{ConstLabels: prometheus.Labels{"engine": "target"}}))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	buf, err := fabric.AllocHost(1 << 20)
	require.NoError(t, err)
	defer buf.Free()
	src, err := writer.RegisterHost(buf, fabric.AccessLocal)
	require.NoError(t, err)
	dst, err := target.RegisterHost(buf, fabric.AccessRemoteWrite)
	require.NoError(t, err)
	desc, err := dst.Descriptor()
	require.NoError(t, err)
	write := func() error {
		tr := fabric.NewTransfer()
		if err := writer.SubmitSingle(fabric.SingleWrite{Src: src, Length: 4096, Dst: desc, Route: fabric.Pinned(0)},
			fabric.Notify(tr)); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return tr.Wait(wctx)
	}

	before := scrape(t, srv.URL)
	require.Zero(t, sum(t, before, "ferry_nic_bytes_total", map[string]string{"engine": "writer"}))
	require.NoError(t, write())
	require.NoError(t, fabrictest.Inject(writer.Info().Groups[0].Domains[0].Address, fabrictest.Faults{FailWrites: 1, Errno: 5}))
	require.Error(t, write())

	fams := scrape(t, srv.URL)
	w := map[string]string{"engine": "writer"}
	require.Equal(t, 1.0, sum(t, fams, "ferry_transfers_completed_total", w))
	require.Equal(t, 1.0, sum(t, fams, "ferry_transfers_failed_total", w))
	require.Equal(t, 2.0, sum(t, fams, "ferry_nic_ops_posted_total", w), "two writes posted")
	require.Equal(t, 1.0, sum(t, fams, "ferry_nic_errors_total", map[string]string{"engine": "writer", "index": "0"}))
	require.Zero(t, sum(t, fams, "ferry_nic_errors_total", map[string]string{"engine": "writer", "index": "1"}))
	require.GreaterOrEqual(t, sum(t, fams, "ferry_nic_bytes_total", w), 4096.0)
	require.Zero(t, sum(t, fams, "ferry_nic_ops_in_flight", w), "nothing left in flight")
	require.Zero(t, sum(t, fams, "ferry_transfers_failed_total", map[string]string{"engine": "target"}))
	require.Len(t, fams["ferry_nic_ops_posted_total"].GetMetric(), 4, "two NICs per engine")
	require.Equal(t, 1.0, sum(t, fams, "ferry_engine_info",
		map[string]string{"engine": "writer", "transport": "mem", "poll": writer.Info().Poll.String()}))
	require.Len(t, fams["ferry_nic_link_speed_bits_per_second"].GetMetric(), 4)
	for _, m := range fams["ferry_nic_ops_posted_total"].GetMetric() {
		names := map[string]bool{}
		for _, l := range m.GetLabel() {
			names[l.GetName()] = true
		}
		require.Equal(t, map[string]bool{"engine": true, "device": true, "nic": true, "index": true}, names)
	}
}

// Every numeric field of the engine's counters has a metric, and each
// metric reads the field it names: adding a Stats field without a line
// in metrics.go fails here.
func TestEveryStatsFieldExported(t *testing.T) {
	check := func(t *testing.T, typ reflect.Type, fields []string, value func(v reflect.Value, i int) float64) {
		t.Helper()
		want := map[string]bool{}
		for i := range typ.NumField() {
			switch typ.Field(i).Type.Kind() {
			case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Uint32, reflect.Int32, reflect.Float64:
				want[typ.Field(i).Name] = true
			}
		}
		got := map[string]bool{}
		for i, f := range fields {
			got[f] = true
			// A distinct value in every numeric field: the metric must
			// read exactly its own.
			v := reflect.New(typ).Elem()
			n := 0
			for k := range typ.NumField() {
				if want[typ.Field(k).Name] {
					n++
					v.Field(k).Set(reflect.ValueOf(n * 7).Convert(typ.Field(k).Type))
				}
			}
			require.Equal(t, v.FieldByName(f).Convert(reflect.TypeOf(0.0)).Float(), value(v, i), "metric of %s.%s", typ.Name(), f)
		}
		if typ == reflect.TypeOf(fabric.DomainSnapshot{}) {
			delete(want, "Index") // a label, not a value
		}
		require.Equal(t, want, got, "numeric fields of %s and the metrics exporting them", typ.Name())
	}
	var ef []string
	for _, m := range engineMetrics {
		ef = append(ef, m.field)
	}
	check(t, reflect.TypeOf(fabric.Stats{}), ef, func(v reflect.Value, i int) float64 {
		s := v.Interface().(fabric.Stats)
		return engineMetrics[i].value(&s)
	})
	var nf []string
	for _, m := range nicMetrics {
		nf = append(nf, m.field)
	}
	check(t, reflect.TypeOf(fabric.DomainSnapshot{}), nf, func(v reflect.Value, i int) float64 {
		d := v.Interface().(fabric.DomainSnapshot)
		return nicMetrics[i].value(&d)
	})
}

// A registry takes one collector per engine when their ConstLabels have
// the same names and different values, and refuses a duplicate.
func TestDistinctEngines(t *testing.T) {
	a, b := openMem(t, 1), openMem(t, 1)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(New(a, Options{ConstLabels: prometheus.Labels{"engine": "a"}})))
	require.Error(t, reg.Register(New(b, Options{ConstLabels: prometheus.Labels{"engine": "a"}})))
	require.NoError(t, reg.Register(New(b, Options{ConstLabels: prometheus.Labels{"engine": "b"}})))
	single := prometheus.NewRegistry()
	require.NoError(t, single.Register(New(a, Options{})), "one engine needs no labels")
}

// TestLostPeerSeries: a peer the engine declares lost gets its own series,
// named by its address, and loses it once it answers again.
func TestLostPeerSeries(t *testing.T) {
	e, err := fabric.Open(context.Background(), fabric.Config{Transport: fabrictest.Mem, LivenessInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	defer e.Close(context.Background())
	peer, err := fabric.Open(context.Background(), fabric.Config{Transport: fabrictest.Mem})
	require.NoError(t, err)
	defer peer.Close(context.Background())
	reg := prometheus.NewRegistry()
	reg.MustRegister(New(e, Options{}))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	addr := peer.Info().Groups[0].Domains[0].Address
	stop, err := e.WatchPeer(peer.MainAddress())
	require.NoError(t, err)
	defer stop()
	require.Empty(t, scrape(t, srv.URL)["ferry_peer_lost"].GetMetric())
	require.NoError(t, fabrictest.Inject(addr, fabrictest.Faults{Dead: true}))
	deadline := time.Now().Add(10 * time.Second)
	for len(e.LostPeers()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, 1.0, sum(t, scrape(t, srv.URL), "ferry_peer_lost", map[string]string{"peer": addr.String()}),
		"the dead peer has its series")
	require.Len(t, e.LostPeers(), 1)
	require.Equal(t, addr, e.LostPeers()[0].Peer)
}
