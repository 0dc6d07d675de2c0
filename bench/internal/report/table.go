package report

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Column is one column of a table: its heading names the quantity and its
// unit ("p50_us", "Gbit/s"), and every cell is padded to Width.
type Column struct {
	Head  string
	Width int
	Left  bool // align cells to the left (names); numbers align right
}

// Table prints a header once and then rows as they come. Lines that are
// not rows start with '#', so a reader (awk, a plotting script) can skip
// them; rows start with two spaces so they line up under the heading.
// Writes go straight to the writer, one call per line: a row is visible
// as soon as its case completes. The first write error is kept and every
// later write skipped (see Err).
type Table struct {
	w    io.Writer
	cols []Column
	err  error
}

// NoteWidth is where Field wraps its text.
const NoteWidth = 100

// labelWidth aligns the text of header fields ("verified: ").
const labelWidth = 10

// NewTable returns a table writing to w.
func NewTable(w io.Writer, cols ...Column) *Table {
	for i := range cols {
		cols[i].Width = max(cols[i].Width, len([]rune(cols[i].Head)))
	}
	return &Table{w: w, cols: cols}
}

// Err returns the first write error.
func (t *Table) Err() error { return t.err }

func (t *Table) line(s string) {
	if t.err != nil {
		return
	}
	_, t.err = io.WriteString(t.w, s+"\n")
}

// Note writes text as one comment line per line of text, unwrapped.
func (t *Table) Note(text string) {
	for _, l := range strings.Split(text, "\n") {
		t.line(strings.TrimRight("# "+l, " "))
	}
}

// Field writes a labelled header field, "# label:  text", wrapping text
// at NoteWidth under itself; a newline in text starts a new line there.
func (t *Table) Field(label, text string) {
	lead := fmt.Sprintf("# %-*s", labelWidth, label+":")
	indent := "#" + strings.Repeat(" ", len(lead)-1)
	for _, para := range strings.Split(text, "\n") {
		for _, l := range wrap(para, NoteWidth-len(lead)) {
			t.line(strings.TrimRight(lead+l, " "))
			lead = indent
		}
	}
}

// wrap breaks s into lines of at most width runes at spaces (a longer
// word stays whole).
func wrap(s string, width int) []string {
	words := strings.Fields(s)
	if len(words) == 0 {
		return []string{""}
	}
	var out []string
	cur := words[0]
	for _, w := range words[1:] {
		if len([]rune(cur))+1+len([]rune(w)) > width {
			out = append(out, cur)
			cur = w
			continue
		}
		cur += " " + w
	}
	return append(out, cur)
}

// Heading writes the column headings.
func (t *Table) Heading() {
	heads := make([]string, len(t.cols))
	for i, c := range t.cols {
		heads[i] = c.Head
	}
	t.line("# " + t.cells(heads))
}

// Row writes one row; missing cells print as "-".
func (t *Table) Row(cells ...string) {
	t.line("  " + t.cells(cells))
}

func (t *Table) cells(cells []string) string {
	var b strings.Builder
	for i, c := range t.cols {
		v := "-"
		if i < len(cells) && cells[i] != "" {
			v = cells[i]
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		pad := strings.Repeat(" ", max(0, c.Width-len([]rune(v))))
		if c.Left {
			b.WriteString(v + pad)
		} else {
			b.WriteString(pad + v)
		}
	}
	return strings.TrimRight(b.String(), " ")
}

// Fixed formats v with prec decimals; NaN and infinities print as "-".
func Fixed(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// Int formats n.
func Int(n int) string { return strconv.Itoa(n) }

// Bytes prints n the way the tables do: "64 KiB", "10000 B".
func Bytes(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
