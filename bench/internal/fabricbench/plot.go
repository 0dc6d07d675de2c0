package fabricbench

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// The chart: bandwidth (Gbit/s) against message size on a log2 axis, one
// line per series (single writes, paged writes per page count, per rank
// pair), drawn with gonum's plot package.

// Plot size; at the PNG's 96 dpi, 864 x 518 pixels.
const (
	plotWidth  = 9 * vg.Inch
	plotHeight = 5.4 * vg.Inch
)

type series struct {
	name string
	pts  plotter.XYs // bytes, Gbit/s
}

// plotSeries groups the measured write cases into series, each sorted by
// size. Immediate-only writes carry no payload and are left out.
func (r *Report) plotSeries() []series {
	var out []series
	idx := map[string]int{}
	for _, c := range r.Cases {
		if c.Workload == Imm || c.Lat.N == 0 || c.Bytes == 0 {
			continue
		}
		name := c.Workload
		if c.Workload == Paged {
			name = fmt.Sprintf("paged x%d", c.Pages)
		}
		if c.Pair != "" {
			name = c.Pair + " " + name
		}
		i, ok := idx[name]
		if !ok {
			i = len(out)
			idx[name] = i
			out = append(out, series{name: name})
		}
		out[i].pts = append(out[i].pts, plotter.XY{X: float64(c.Bytes), Y: c.Gbps})
	}
	for i := range out {
		slices.SortFunc(out[i].pts, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
	}
	return out
}

// sizeTicks marks powers of two on a log axis, labelled 1K, 64K, 1M, and
// leaves every other label out when there are many.
type sizeTicks struct{}

func (sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	first, last := math.Floor(math.Log2(lo)), math.Ceil(math.Log2(hi))
	step := 1.0
	if last-first > 12 {
		step = 2
	}
	var ticks []plot.Tick
	for e := first; e <= last; e++ {
		t := plot.Tick{Value: math.Exp2(e)}
		if math.Mod(e-first, step) == 0 {
			t.Label = shortBytes(uint64(t.Value))
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// shortBytes labels a power of two: 512, 1K, 64K, 1M.
func shortBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprint(n)
}

// newPlot builds the chart of r.
func (r *Report) newPlot() (*plot.Plot, error) {
	p := plot.New()
	h := r.Header
	p.Title.Text = fmt.Sprintf("fabric-debug %s: %s, %d NIC(s), poll %s", h.Mode, h.Transport, h.NICs, h.Poll)
	if h.LoopbackProvider {
		p.Title.Text += "\nloopback provider: this host's CPU and memory, not a NIC"
	}
	// A long axis label would narrow the plotting area: keep it short.
	p.X.Label.Text = "message or page size (bytes)"
	p.Y.Label.Text = "Gbit/s"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sizeTicks{}
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true

	ss := r.plotSeries()
	if len(ss) == 0 {
		// Empty axes over the default sizes, saying why.
		p.Title.Text += " (no write cases measured)"
		p.X.Min, p.X.Max, p.Y.Max = 1<<10, 64<<20, 1
		return p, nil
	}
	args := make([]any, 0, 2*len(ss))
	for _, s := range ss {
		args = append(args, s.name, s.pts)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, err
	}
	if p.X.Min == p.X.Max {
		// One size only: widen the log axis to a power of two each side.
		p.X.Min, p.X.Max = p.X.Min/2, p.X.Max*2
	}
	return p, nil
}

// WritePlot draws the chart as a PNG. A report without write cases gives
// a chart with empty axes and a title saying so.
func (r *Report) WritePlot(w io.Writer) error {
	p, err := r.newPlot()
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	wt, err := p.WriterTo(plotWidth, plotHeight, "png")
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	_, err = wt.WriteTo(w)
	return err
}
