package fabricbench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Result is one measured case: a line of the table and an object of the
// JSON output.
type Result struct {
	Workload string `json:"workload"`
	Bytes    uint64 `json:"bytes"`
	Pages    int    `json:"pages"`
	Iters    int    `json:"iters"`
	Warmup   int    `json:"warmup"`
	// Pair names writer and target in ranks mode ("0->1").
	Pair string `json:"pair,omitempty"`

	LatUsMean float64 `json:"lat_us_mean"`
	LatUsSD   float64 `json:"lat_us_sd"`
	LatUsP50  float64 `json:"lat_us_p50"`
	LatUsMin  float64 `json:"lat_us_min"`
	LatUsMax  float64 `json:"lat_us_max"`
	Gbps      float64 `json:"gbps"`
	GbpsSD    float64 `json:"gbps_sd"`
	Mops      float64 `json:"mops"`
	MopsSD    float64 `json:"mops_sd"`
	// MopsPerDomain divides Mops by the writer's NICs.
	MopsPerDomain float64 `json:"mops_per_domain"`
	// LinkPct is Gbps against the writer's link speed; absent when the
	// provider reports none.
	LinkPct *float64 `json:"link_pct,omitempty"`
	// Verify says the case is a verified one; Verified that its check
	// passed (false when it failed or was not a verified case).
	Verify   bool   `json:"verify"`
	Verified bool   `json:"verified"`
	Error    string `json:"error,omitempty"`
}

// Summarize turns timed latencies into a Result. Bandwidth and rate are
// computed per iteration (payload bits or writes over that iteration's
// time), so their spread is reported too. linkBps is the writer's link
// speed (0 when unknown).
func Summarize(c Case, lat []time.Duration, nics int, linkBps uint64) Result {
	r := Result{Workload: c.Workload, Bytes: c.Bytes, Pages: c.Pages, Iters: len(lat), Warmup: c.Warmup, Verify: c.Verify}
	if len(lat) == 0 {
		return r
	}
	us := make([]float64, len(lat))
	bw := make([]float64, len(lat))
	ops := make([]float64, len(lat))
	for i, d := range lat {
		s := max(d.Seconds(), 1e-9)
		us[i] = s * 1e6
		bw[i] = float64(c.Total()) * 8 / s / 1e9
		ops[i] = float64(c.Ops()) / s / 1e6
	}
	r.LatUsMean, r.LatUsSD = meanSD(us)
	sorted := slices.Clone(us)
	slices.Sort(sorted)
	r.LatUsP50 = sorted[len(sorted)/2]
	r.LatUsMin, r.LatUsMax = sorted[0], sorted[len(sorted)-1]
	r.Gbps, r.GbpsSD = meanSD(bw)
	r.Mops, r.MopsSD = meanSD(ops)
	r.MopsPerDomain = r.Mops / float64(max(nics, 1))
	if linkBps > 0 && c.Total() > 0 {
		p := r.Gbps * 1e9 / float64(linkBps) * 100
		r.LinkPct = &p
	}
	return r
}

func meanSD(v []float64) (mean, sd float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	if len(v) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range v {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(v)-1))
}

// Header says what ran: it is the first object of the JSON output and the
// first lines of the table.
type Header struct {
	Tool      string `json:"tool"`
	Mode      string `json:"mode"` // loopback, client, ranks, raw
	Provider  string `json:"provider"`
	Transport string `json:"transport"`
	NICs      int    `json:"nics"`
	Poll      string `json:"poll"`
	Memory    string `json:"memory"`
	LinkSpeed uint64 `json:"link_speed_bps"`
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

// Report is a whole run.
type Report struct {
	Header Header   `json:"header"`
	Cases  []Result `json:"cases"`
}

// add appends a case, dropping its link percentage when the header has
// no real link speed to compare with.
func (r *Report) add(res Result) {
	if r.Header.LinkSpeed == 0 {
		res.LinkPct = nil
	}
	r.Cases = append(r.Cases, res)
}

// Failed reports whether any case failed or did not verify.
func (r *Report) Failed() bool {
	for _, c := range r.Cases {
		if c.Error != "" || (c.Verify && !c.Verified) {
			return true
		}
	}
	return false
}

// isLoopback reports whether a transport moves bytes without a NIC.
func isLoopback(transport string) bool {
	for _, t := range []string{"shm", "tcp", "sockets", "udp", "mem", "null"} {
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
	h := Header{Tool: "fabric-debug", Mode: mode, Provider: in.Provider, Transport: in.Transport, NICs: in.NICs,
		Poll: in.Poll, Memory: "host", LinkSpeed: in.LinkSpeed, Engine: true, Verify: s.Verify, Domains: in.Domains}
	if h.Transport == "" {
		h.Transport = s.Provider
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
		h.Note = h.Transport + " is a loopback provider: the figures measure this host's CPU and memory, not a NIC"
	}
	return h
}

// WriteJSON writes the report as one JSON document: {"header":{...},
// "cases":[{...}, ...]}.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable prints the report in the reference tool's line shape, so its
// figures can be put side by side.
func (r *Report) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	h := r.Header
	link := "n/a"
	if h.LinkSpeed > 0 {
		link = fmt.Sprintf("%.0fGbps", float64(h.LinkSpeed)/1e9)
	}
	what := "Initialized TransferEngine."
	if !h.Engine {
		what = "Raw libfabric loop (no engine)."
	}
	fmt.Fprintf(ew, "%s provider=%s transport=%s num_nets=%d nets_per_gpu=%d link_speed=%s poll=%s memory=%s mode=%s",
		what, h.Provider, h.Transport, h.NICs, h.NICs, link, h.Poll, h.Memory, h.Mode)
	if h.World > 0 {
		fmt.Fprintf(ew, " world_size=%d", h.World)
	}
	fmt.Fprintln(ew)
	if len(h.Domains) > 0 {
		fmt.Fprintf(ew, "nics: %s\n", strings.Join(h.Domains, " "))
	}
	if h.Note != "" {
		fmt.Fprintf(ew, "note: %s\n", h.Note)
	}
	pair := ""
	for _, c := range r.Cases {
		if c.Pair != pair {
			pair = c.Pair
			fmt.Fprintf(ew, "-- rank %s\n", pair)
		}
		fmt.Fprintln(ew, c.Line())
	}
	if r.Failed() {
		fmt.Fprintln(ew, "FAILED")
	} else {
		fmt.Fprintln(ew, "Done!")
	}
	return ew.err
}

// Line formats one case.
func (c Result) Line() string {
	var b strings.Builder
	switch c.Workload {
	case Paged:
		fmt.Fprintf(&b, "page_bytes: %8s, num_pages: %5d  ", FormatBytes(c.Bytes), c.Pages)
	case Single:
		fmt.Fprintf(&b, "bytes: %8s                      ", FormatBytes(c.Bytes))
	case Imm:
		fmt.Fprintf(&b, "Imm %-8s                         ", verdict(c))
	}
	if c.Error != "" && c.Iters == 0 {
		fmt.Fprintf(&b, "ERROR: %s", c.Error)
		return b.String()
	}
	b.WriteString(fmtLat(c.LatUsMean, c.LatUsSD, c.LatUsP50))
	if c.Workload != Imm {
		pct := "n/a"
		if c.LinkPct != nil {
			pct = fmt.Sprintf("%.1f%%", *c.LinkPct)
		}
		fmt.Fprintf(&b, ", bw: %7.2f ± %6.2f Gbps (%s), rate: %7.3f ± %6.3f Mpps (per domain: %.3f Mpps)",
			c.Gbps, c.GbpsSD, pct, c.Mops, c.MopsSD, c.MopsPerDomain)
		if c.Verify {
			fmt.Fprintf(&b, "  %s", verdict(c))
		}
	}
	fmt.Fprintf(&b, "  [%d iters]", c.Iters)
	if c.Error != "" {
		fmt.Fprintf(&b, "  ERROR: %s", c.Error)
	}
	return b.String()
}

func verdict(c Result) string {
	switch {
	case !c.Verify:
		return ""
	case c.Verified:
		return "VERIFIED"
	}
	return "FAILED"
}

// fmtLat prints "lat: mean ± sd unit (p50 x)", in µs when the mean is
// below a millisecond and in ms (the reference's unit) above, with fixed
// widths so the columns line up.
func fmtLat(mean, sd, p50 float64) string {
	if mean >= 1000 {
		return fmt.Sprintf("lat: %8.3f ± %7.3f ms (p50 %8.3f ms)", mean/1000, sd/1000, p50/1000)
	}
	return fmt.Sprintf("lat: %8.2f ± %7.2f µs (p50 %8.2f µs)", mean, sd, p50)
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
