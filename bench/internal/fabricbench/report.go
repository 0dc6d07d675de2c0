package fabricbench

import (
	"strings"
	"time"

	"github.com/ferryrdma/ferry/bench/internal/report"
)

// Result is one measured case: a row of the table and a case record of
// the JSON output. Latencies are in microseconds; Gbps (Gbit/s) and Mops
// (million writes per second) are the payload of the timed iterations
// over their summed time, as ib_write_bw's averages are.
type Result struct {
	Workload string `json:"workload"`
	Bytes    uint64 `json:"bytes"`
	Pages    int    `json:"pages"`
	// Pair names writer and target in ranks mode ("0->1").
	Pair string `json:"pair,omitempty"`
	report.Measure
	Gbps float64 `json:"gbit_s"`
	Mops float64 `json:"mop_s"`
	// MopsPerNIC divides Mops by the writer's NICs.
	MopsPerNIC float64 `json:"mop_s_per_nic"`
	// LinkPct is Gbps against the writer's link speed; absent when the
	// provider reports none.
	LinkPct *float64 `json:"link_pct,omitempty"`
}

// newResult is the row of c before it is measured.
func newResult(c Case) Result {
	return Result{Workload: c.Workload, Bytes: c.Bytes, Pages: c.Pages,
		Measure: report.Measure{Iters: c.Iters, Warmup: c.Warmup, Checked: c.Verify}}
}

// Summarize turns timed latencies into a Result. linkBps is the writer's
// link speed (0 when unknown). The result is not verified yet: the target
// says so.
func Summarize(c Case, lat []time.Duration, nics int, linkBps uint64) Result {
	r := newResult(c)
	r.Iters = len(lat)
	if len(lat) == 0 {
		return r
	}
	r.Lat = report.Summarize(report.Micros(lat))
	var total time.Duration
	for _, d := range lat {
		total += d
	}
	secs := max(total.Seconds(), 1e-9)
	r.Gbps = float64(c.Total()) * float64(len(lat)) * 8 / secs / 1e9
	r.Mops = float64(c.Ops()) * float64(len(lat)) / secs / 1e6
	r.MopsPerNIC = r.Mops / float64(max(nics, 1))
	if linkBps > 0 && c.Total() > 0 {
		p := r.Gbps * 1e9 / float64(linkBps) * 100
		r.LinkPct = &p
	}
	return r
}

// Header says what ran: it is the first object of the JSON output and the
// first lines of the table.
type Header struct {
	Mode      string `json:"mode"` // loopback, client, ranks, raw
	Provider  string `json:"provider"`
	Transport string `json:"transport"`
	// Reason is why the engine chose the transport ("explicit", or what
	// auto found).
	Reason string `json:"reason,omitempty"`
	NICs   int    `json:"nics"`
	// TargetNICs is the receiving engine's NIC count where it differs
	// from the writer's (loopback --target-nics).
	TargetNICs int    `json:"target_nics,omitempty"`
	Poll       string `json:"poll"`
	Memory     string `json:"memory"`
	LinkSpeed  uint64 `json:"link_speed_bps"`
	// Engine is false for raw runs, which bypass it.
	Engine bool `json:"engine"`
	Verify bool `json:"verify"`
	// LoopbackProvider is set when the transport does not use a NIC, so
	// the figures measure this host's CPU and memory.
	LoopbackProvider bool   `json:"loopback_provider"`
	Note             string `json:"note,omitempty"`
	World            int    `json:"world_size,omitempty"`
	// Domains are the writer's NICs.
	Domains []string `json:"domains,omitempty"`
}

// Sink receives a report as it grows: the header once, before the first
// case, then every case as it completes. [Printer] is the one that prints.
type Sink interface {
	Header(Header)
	Result(Result)
}

// Report is a whole run.
type Report struct {
	Header Header   `json:"header"`
	Cases  []Result `json:"cases"`
	sink   Sink
}

// newReport starts a report and hands its header to sink (nil: none).
func newReport(h Header, sink Sink) *Report {
	r := &Report{Header: h, sink: sink}
	if sink != nil {
		sink.Header(h)
	}
	return r
}

// add appends a case, dropping its link percentage when the header has
// no real link speed to compare with, and hands it to the sink.
func (r *Report) add(res Result) {
	if r.Header.LinkSpeed == 0 {
		res.LinkPct = nil
	}
	r.Cases = append(r.Cases, res)
	if r.sink != nil {
		r.sink.Result(res)
	}
}

// Failed reports whether any case failed or did not verify.
func (r *Report) Failed() bool {
	for _, c := range r.Cases {
		if c.Failed() {
			return true
		}
	}
	return false
}

// isLoopback reports whether a transport moves bytes without a NIC.
func isLoopback(transport string) bool {
	for _, t := range []string{"shm", "ipc", "tcp", "sockets", "udp", "mem", "null"} {
		if strings.Contains(transport, t) {
			return true
		}
	}
	return false
}

// softRDMA returns the first software RDMA device (rxe, siw) among
// domains named device:name#index, or "".
func softRDMA(domains []string) string {
	for _, d := range domains {
		name := d
		if i := strings.IndexByte(name, ':'); i >= 0 {
			name = name[i+1:]
		}
		if i := strings.IndexByte(name, '#'); i >= 0 {
			name = name[:i]
		}
		if strings.HasPrefix(name, "rxe") || strings.HasPrefix(name, "siw") {
			return name
		}
	}
	return ""
}

// newHeader fills the parts every mode shares.
func newHeader(mode string, s Spec, in PeerInfo) Header {
	h := Header{Mode: mode, Provider: in.Provider, Transport: in.Transport, Reason: in.Reason, NICs: in.NICs,
		Poll: in.Poll, Memory: "host", LinkSpeed: in.LinkSpeed, Engine: true, Verify: s.Verify, Domains: in.Domains}
	if h.Transport == "" {
		h.Transport = s.Provider
	}
	if s.TargetNICs != 0 && s.TargetNICs != h.NICs {
		h.TargetNICs = s.TargetNICs
	}
	h.LoopbackProvider = isLoopback(h.Transport)
	if h.Transport == "null" || h.Transport == "mem" {
		// The in-process domains report a nominal link speed; a
		// percentage of it would mean nothing.
		h.LinkSpeed = 0
	}
	switch {
	case softRDMA(h.Domains) != "":
		h.Note = softRDMA(h.Domains) + " is Soft-RoCE (rdma_rxe) or soft-iWARP: the kernel emulates the RDMA device, so the figures are the emulation's, not a NIC's"
	case h.Transport == "null":
		h.Note = "null completes every write at once without moving bytes: the figures are the engine's own overhead, not a NIC's"
	case h.LoopbackProvider:
		h.Note = h.Transport + " is a loopback provider: figures measure this host's CPU and memory, not a NIC"
	}
	return h
}
