package fabricbench

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"slices"
	"strings"
	"unicode"
)

// The chart: bandwidth (Gbps) against message size on a log2 axis, one
// line per series (single writes, paged writes per page count, per rank
// pair), drawn with the standard library only.

const (
	plotW, plotH                       = 900, 540
	marginL, marginR, marginT, marginB = 80, 210, 50, 70
)

var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xff, 0x7f, 0x0e, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
}

var (
	black = color.RGBA{0, 0, 0, 0xff}
	grey  = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
)

type series struct {
	name string
	pts  [][2]float64 // bytes, Gbps
}

// plotSeries groups the measured, unverified write cases into series.
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
		out[i].pts = append(out[i].pts, [2]float64{float64(c.Bytes), c.Gbps})
	}
	for i := range out {
		slices.SortFunc(out[i].pts, func(a, b [2]float64) int { return int(math.Copysign(1, a[0]-b[0])) })
	}
	return out
}

// WritePlot draws the chart as a PNG. A report without write cases gives
// a chart with empty axes and a note saying so.
func (r *Report) WritePlot(w io.Writer) error {
	img := image.NewRGBA(image.Rect(0, 0, plotW, plotH))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	ss := r.plotSeries()
	xmin, xmax, ymax := 10.0, 26.0, 1.0 // 1 KiB to 64 MiB until data says otherwise
	first := true
	for _, s := range ss {
		for _, p := range s.pts {
			lx := math.Log2(p[0])
			if first {
				xmin, xmax, first = math.Floor(lx), math.Ceil(lx), false
			}
			xmin, xmax = min(xmin, math.Floor(lx)), max(xmax, math.Ceil(lx))
			ymax = max(ymax, p[1])
		}
	}
	if xmax-xmin < 1 {
		xmin, xmax = xmin-1, xmax+1
	}
	ystep := niceStep(ymax / 5)
	ymax = math.Ceil(ymax/ystep) * ystep
	x0, y0, x1, y1 := marginL, plotH-marginB, plotW-marginR, marginT
	px := func(b float64) int { return x0 + int((math.Log2(b)-xmin)/(xmax-xmin)*float64(x1-x0)) }
	py := func(g float64) int { return y0 - int(g/ymax*float64(y0-y1)) }

	// Grid and ticks.
	for e := xmin; e <= xmax; e++ {
		x := px(math.Exp2(e))
		vline(img, x, y1, y0, grey)
		vline(img, x, y0, y0+5, black)
		if int(e-xmin)%2 == 0 || xmax-xmin <= 10 {
			lbl := shortBytes(uint64(math.Exp2(e)))
			text(img, x-textWidth(lbl, 1)/2, y0+10, lbl, 1, black)
		}
	}
	for g := 0.0; g <= ymax+ystep/2; g += ystep {
		y := py(g)
		hline(img, x0, x1, y, grey)
		hline(img, x0-5, x0, y, black)
		lbl := trimFloat(g)
		text(img, x0-10-textWidth(lbl, 1), y-3, lbl, 1, black)
	}
	vline(img, x0, y1, y0, black)
	hline(img, x0, x1, y0, black)

	h := r.Header
	title := fmt.Sprintf("fabric-debug %s %s, %d nic(s), poll %s", h.Mode, h.Transport, h.NICs, h.Poll)
	text(img, x0, 15, title, 2, black)
	text(img, (x0+x1)/2-textWidth("message size (bytes)", 1)/2, y0+35, "message size (bytes)", 1, black)
	text(img, 8, y1-20, "Gbps", 1, black)
	if h.LoopbackProvider {
		text(img, x0, y0+52, "loopback provider: host CPU and memory, not NIC figures", 1, black)
	}
	if len(ss) == 0 {
		text(img, x0+20, y1+20, "no write cases measured", 2, black)
	}

	for i, s := range ss {
		c := palette[i%len(palette)]
		for k, p := range s.pts {
			x, y := px(p[0]), py(p[1])
			box(img, x-3, y-3, x+3, y+3, c)
			if k > 0 {
				line(img, px(s.pts[k-1][0]), py(s.pts[k-1][1]), x, y, c)
			}
		}
		ly := y1 + 10 + i*18
		box(img, x1+20, ly, x1+32, ly+8, c)
		text(img, x1+40, ly+1, s.name, 1, black)
	}
	return png.Encode(w, img)
}

// niceStep rounds a raw tick step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

// shortBytes labels a power of two: 1K, 64K, 1M.
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

func set(img *image.RGBA, x, y int, c color.RGBA) {
	if image.Pt(x, y).In(img.Rect) {
		img.SetRGBA(x, y, c)
	}
}

func hline(img *image.RGBA, xa, xb, y int, c color.RGBA) {
	for x := xa; x <= xb; x++ {
		set(img, x, y, c)
	}
}

func vline(img *image.RGBA, x, ya, yb int, c color.RGBA) {
	for y := ya; y <= yb; y++ {
		set(img, x, y, c)
	}
}

func box(img *image.RGBA, xa, ya, xb, yb int, c color.RGBA) {
	for y := ya; y <= yb; y++ {
		hline(img, xa, xb, y, c)
	}
}

// line draws a two-pixel-wide segment (Bresenham, doubled).
func line(img *image.RGBA, xa, ya, xb, yb int, c color.RGBA) {
	dx, dy := abs(xb-xa), -abs(yb-ya)
	sx, sy := sign(xb-xa), sign(yb-ya)
	e := dx + dy
	for {
		set(img, xa, ya, c)
		set(img, xa+1, ya, c)
		set(img, xa, ya+1, c)
		if xa == xb && ya == yb {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			xa += sx
		}
		if e2 <= dx {
			e += dx
			ya += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

func textWidth(s string, scale int) int { return len([]rune(s)) * 6 * scale }

// text draws s with the 5x7 font at (x, y), the top left corner, scaled.
func text(img *image.RGBA, x, y int, s string, scale int, c color.RGBA) {
	for _, r := range s {
		g, ok := glyphs[unicode.ToUpper(r)]
		if !ok {
			g = glyphs['?']
		}
		for row, bits := range g {
			for col := 0; col < 5; col++ {
				if bits&(1<<(4-col)) != 0 {
					box(img, x+col*scale, y+row*scale, x+col*scale+scale-1, y+row*scale+scale-1, c)
				}
			}
		}
		x += 6 * scale
	}
}
