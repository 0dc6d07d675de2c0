package fabricmetrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ferryrdma/ferry/fabric"
)

// Source is what a Collector reads: *fabric.Engine implements it.
type Source interface {
	Stats() fabric.Stats
	Info() fabric.Info
}

// PeerSource is a Source that can also list the peers it holds lost
// (*fabric.Engine is one): the collector then exports one series per lost
// peer, so an alert names the peer.
type PeerSource interface {
	Source
	LostPeers() []*fabric.PeerError
}

var _ PeerSource = (*fabric.Engine)(nil)

// HistogramSource is a Source that also keeps transfer histograms
// (*fabric.Engine is one): the collector then exports the latency and
// size distributions of its transfers, per transport and kind.
type HistogramSource interface {
	Source
	TransferHistograms() []fabric.TransferHistogram
}

var _ HistogramSource = (*fabric.Engine)(nil)

// Options tune a Collector.
type Options struct {
	// ConstLabels are added to every metric, to tell engines apart when
	// one registry serves several (engine="server", rank="3"): every
	// collector of one registry needs the same label names, with values
	// that differ.
	ConstLabels prometheus.Labels
}

// Collector is a prometheus.Collector over one engine. It is safe for
// concurrent scrapes; each reads the engine's counters once.
type Collector struct {
	src    Source
	engine []*prometheus.Desc
	nic    []*prometheus.Desc
	link   *prometheus.Desc
	info   *prometheus.Desc
	lib    *prometheus.Desc
	lost   *prometheus.Desc
	lat    *prometheus.Desc
	size   *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a collector over src (an engine). Register it with a
// prometheus.Registerer.
func New(src Source, opt Options) *Collector {
	c := &Collector{src: src}
	name := func(n string) string { return prometheus.BuildFQName(namespace, "", n) }
	for _, m := range engineMetrics {
		c.engine = append(c.engine, prometheus.NewDesc(name(m.name), m.help, nil, opt.ConstLabels))
	}
	for _, m := range nicMetrics {
		c.nic = append(c.nic, prometheus.NewDesc(name(m.name), m.help, nicLabels, opt.ConstLabels))
	}
	c.link = prometheus.NewDesc(name("nic_link_speed_bits_per_second"),
		"The NIC's link speed as its provider reports it (0: unknown).", nicLabels, opt.ConstLabels)
	c.info = prometheus.NewDesc(name("engine_info"),
		"Always 1; the labels say which provider and transport the engine runs and how it polls.",
		[]string{"provider", "transport", "poll"}, opt.ConstLabels)
	c.lib = prometheus.NewDesc(name("library_info"),
		"Always 1, for providers that run on a native library (libfabric); the labels name it, the version loaded and the API version the provider asks it for.",
		[]string{"library", "version", "api"}, opt.ConstLabels)
	c.lost = prometheus.NewDesc(name("peer_lost"),
		"1 for each peer the engine holds lost now (declared lost, not heard from since); the peer label is its endpoint address.",
		[]string{"peer"}, opt.ConstLabels)
	c.lat = prometheus.NewDesc(name("transfer_latency_seconds"),
		"Latency of the transfers that succeeded, from the worker taking the request to its completion, per transport and kind (op).",
		histLabels, opt.ConstLabels)
	c.size = prometheus.NewDesc(name("transfer_size_bytes"),
		"Bytes each successful transfer wrote or sent (0 for immediates and barriers), per transport and kind (op).",
		histLabels, opt.ConstLabels)
	return c
}

// histLabels name a transfer histogram.
var histLabels = []string{"transport", "op"}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.engine {
		ch <- d
	}
	for _, d := range c.nic {
		ch <- d
	}
	ch <- c.link
	ch <- c.info
	ch <- c.lib
	ch <- c.lost
	ch <- c.lat
	ch <- c.size
}

// Collect reads the engine's counters once and sends them.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	for i, m := range engineMetrics {
		ch <- prometheus.MustNewConstMetric(c.engine[i], m.kind, m.value(&s))
	}
	for k := range s.Domains {
		d := &s.Domains[k]
		lv := labelsOf(d)
		for i, m := range nicMetrics {
			ch <- prometheus.MustNewConstMetric(c.nic[i], m.kind, m.value(d), lv...)
		}
	}
	in := c.src.Info()
	ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, in.Provider, in.Transport, in.Poll.String())
	if lib := in.Library; lib.Name != "" {
		ch <- prometheus.MustNewConstMetric(c.lib, prometheus.GaugeValue, 1, lib.Name, lib.Version, lib.API)
	}
	for _, g := range in.Groups {
		for i, d := range g.Domains {
			ch <- prometheus.MustNewConstMetric(c.link, prometheus.GaugeValue, float64(d.LinkSpeed),
				g.Device.String(), d.Name, strconv.Itoa(i))
		}
	}
	if ps, ok := c.src.(PeerSource); ok {
		for _, pe := range ps.LostPeers() {
			ch <- prometheus.MustNewConstMetric(c.lost, prometheus.GaugeValue, 1, pe.Peer.String())
		}
	}
	if hs, ok := c.src.(HistogramSource); ok {
		for _, h := range hs.TransferHistograms() {
			ch <- prometheus.MustNewConstHistogram(c.lat, h.Count, h.LatencySum, bucketMap(h.Latency), h.Transport, h.Op)
			ch <- prometheus.MustNewConstHistogram(c.size, h.Count, float64(h.SizeSum), bucketMap(h.Size), h.Transport, h.Op)
		}
	}
}

// bucketMap turns cumulative buckets into the map Prometheus wants.
func bucketMap(bs []fabric.HistogramBucket) map[float64]uint64 {
	m := make(map[float64]uint64, len(bs))
	for _, b := range bs {
		m[b.UpperBound] = b.Count
	}
	return m
}
