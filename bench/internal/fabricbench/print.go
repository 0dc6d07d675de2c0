package fabricbench

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ferryrdma/ferry/bench/internal/report"
)

// Output says where a report goes besides the table.
type Output struct {
	// JSON is a file for the JSON records, one object per line, written
	// as the run goes; "-" means stdout, and the table then goes to
	// stderr so stdout holds only JSON lines.
	JSON string
	// Plot is a PNG file for the bandwidth chart, drawn at the end.
	Plot string
}

// What "verified" means, in the table's header and the begin record.
const (
	verifiedEngine = "yes = after the timed iterations the writer repeated the case with an immediate " +
		"on every write; the target (its buffer poisoned first) counted exactly those immediates and " +
		"compared every byte with the seeded pattern (imm: every immediate counted, none extra)\n" +
		"no = not checked, FAIL = checked and wrong, or the case failed"
	verifiedRaw = "yes = the C loop compared every destination byte with the source after the last " +
		"iteration (imm: every immediate counted)\nFAIL = wrong, or the case failed"
	verifiedOff = "no case is checked (--verify=false, or a provider that moves no bytes)"
)

// Printer prints a report as it grows: the header, then one row per
// case as soon as the case completes, and the JSON records beside them.
// It is the [Sink] the fabric-debug modes are given.
type Printer struct {
	s    *report.Stream
	out  Output
	args []string
	pair bool
	link bool
}

// NewPrinter starts the output of a run; args is the command line, for
// the begin record.
func NewPrinter(out Output, args []string, stdout, stderr io.Writer) (*Printer, error) {
	s, err := report.Open(out.JSON, stdout, stderr)
	if err != nil {
		return nil, err
	}
	return &Printer{s: s, out: out, args: args}, nil
}

// Header prints the header lines and the column headings.
func (p *Printer) Header(h Header) {
	p.pair = h.Mode == "ranks"
	p.link = h.LinkSpeed > 0
	cols := []report.Column{{Head: "workload", Width: 8, Left: true}}
	if p.pair {
		cols = append(cols, report.Column{Head: "pair", Width: 5, Left: true})
	}
	cols = append(cols,
		report.Column{Head: "size", Width: 8}, report.Column{Head: "pages", Width: 5},
		report.Column{Head: "iters", Width: 5},
		report.Column{Head: "p50_us", Width: 9}, report.Column{Head: "p99_us", Width: 9},
		report.Column{Head: "min_us", Width: 9}, report.Column{Head: "max_us", Width: 9},
		report.Column{Head: "Gbit/s", Width: 8}, report.Column{Head: "Mop/s", Width: 10})
	if p.link {
		cols = append(cols, report.Column{Head: "link_%", Width: 6})
	}
	cols = append(cols, report.Column{Head: "verified", Width: 8, Left: true})
	p.s.SetColumns(cols...)

	verified := verifiedEngine
	if !h.Engine {
		verified = verifiedRaw
	}
	p.s.Begin(report.Begin{Tool: "fabric-debug", Args: p.args, Verified: verified, Setup: h})
	t := p.s.Table
	t.Note("fabric-debug " + h.Mode)
	t.Field("engine", engineLine(h))
	if len(h.Domains) > 0 {
		t.Field("nics", strings.Join(h.Domains, " "))
	}
	if h.Note != "" {
		t.Field("note", h.Note)
	}
	t.Field("timing", timing(h))
	if !h.Verify {
		verified = verifiedOff
	}
	t.Field("verified", verified)
	t.Note("")
	t.Heading()
}

// engineLine says what moved the bytes.
func engineLine(h Header) string {
	var b strings.Builder
	if !h.Engine {
		b.WriteString("none, libfabric straight from one C loop: ")
	}
	fmt.Fprintf(&b, "provider=%s transport=%s", h.Provider, h.Transport)
	if h.Reason != "" {
		fmt.Fprintf(&b, " (%s)", h.Reason)
	}
	fmt.Fprintf(&b, " nics=%d", h.NICs)
	if h.TargetNICs != 0 {
		fmt.Fprintf(&b, " target_nics=%d", h.TargetNICs)
	}
	fmt.Fprintf(&b, " poll=%s memory=%s", h.Poll, h.Memory)
	if h.LinkSpeed > 0 {
		fmt.Fprintf(&b, " link=%.0fGbps", float64(h.LinkSpeed)/1e9)
	}
	if h.World > 0 {
		fmt.Fprintf(&b, " world_size=%d", h.World)
	}
	return b.String()
}

func timing(h Header) string {
	const rest = "; warmup dropped; Gbit/s and Mop/s = timed payload and writes over the timed iterations' total time"
	switch {
	case !h.Engine:
		return "one C loop posts an iteration's writes and polls until the last completes" + rest
	case h.Mode == "ranks":
		return "rank r writes into rank r+1; one iteration = first submit to last completion at the writer" + rest
	}
	return "the server engine writes into the client's buffer; one iteration = first submit to last " +
		"completion at the writer" + rest
}

// Result prints the row of r (and its error, on the next line).
func (p *Printer) Result(r Result) {
	size, pages, gbps, mops := FormatBytes(r.Bytes), "", report.Fixed(r.Gbps, 2), report.Fixed(r.Mops, 6)
	switch r.Workload {
	case Paged:
		pages = report.Int(r.Pages)
	case Imm:
		size, gbps = "", ""
	}
	cells := []string{r.Workload}
	if p.pair {
		cells = append(cells, r.Pair)
	}
	if r.Lat.N == 0 {
		gbps, mops = "", ""
	}
	lat := func(v float64) string {
		if r.Lat.N == 0 {
			return ""
		}
		return report.Fixed(v, 2)
	}
	cells = append(cells, size, pages, report.Int(r.Lat.N),
		lat(r.Lat.P50), lat(r.Lat.P99), lat(r.Lat.Min), lat(r.Lat.Max), gbps, mops)
	if p.link {
		pct := ""
		if r.LinkPct != nil {
			pct = report.Fixed(*r.LinkPct, 1)
		}
		cells = append(cells, pct)
	}
	cells = append(cells, r.Verdict())
	p.s.Table.Row(cells...)
	if r.Error != "" {
		p.s.Table.Field("error", r.Error)
	}
	p.s.Case(r)
}

// Finish ends the output: the summary line and end record, then the plot
// of rep (when asked for and rep is not nil). runErr is the run's error.
// It returns an error only when the output itself failed.
func (p *Printer) Finish(rep *Report, runErr error) error {
	p.s.End(runErr)
	err := p.s.Close()
	if p.out.Plot != "" && rep != nil {
		if perr := writeFile(p.out.Plot, rep.WritePlot); perr != nil && err == nil {
			err = perr
		}
	}
	return err
}

func writeFile(name string, write func(io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return f.Close()
}
