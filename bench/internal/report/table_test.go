package report

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTable(t *testing.T) {
	var b strings.Builder
	tb := NewTable(&b, Column{Head: "name", Width: 6, Left: true}, Column{Head: "p50_us", Width: 8},
		Column{Head: "verified", Left: true})
	tb.Field("engine", "provider=x transport=y")
	tb.Note("")
	tb.Heading()
	tb.Row("paged", Fixed(12.345, 2), VerdictYes)
	tb.Row("imm", "", VerdictNo)
	require.NoError(t, tb.Err())
	require.Equal(t, ""+
		"# engine:   provider=x transport=y\n"+
		"#\n"+
		"# name     p50_us verified\n"+
		"  paged     12.35 yes\n"+
		"  imm           - no\n", b.String())
}

func TestFieldWraps(t *testing.T) {
	var b strings.Builder
	tb := NewTable(&b)
	tb.Field("verified", strings.Repeat("word ", 40)+"\nsecond line")
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Greater(t, len(lines), 3)
	for i, l := range lines {
		require.LessOrEqual(t, len(l), NoteWidth, l)
		if i == 0 {
			require.True(t, strings.HasPrefix(l, "# verified: word"), l)
			continue
		}
		require.True(t, strings.HasPrefix(l, "#           "), "continuation lines align under the text: %q", l)
	}
	require.Equal(t, "#           second line", lines[len(lines)-1])
}

type failingWriter struct{ n int }

func (f *failingWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, errors.New("disk full")
}

// The first write error is kept and later writes are skipped.
func TestTableKeepsFirstError(t *testing.T) {
	w := &failingWriter{}
	tb := NewTable(w, Column{Head: "a"})
	tb.Heading()
	tb.Row("1")
	require.EqualError(t, tb.Err(), "disk full")
	require.Equal(t, 1, w.n)
}

func TestFormatters(t *testing.T) {
	require.Equal(t, "-", Fixed(math.NaN(), 2))
	require.Equal(t, "-", Fixed(math.Inf(1), 2))
	require.Equal(t, "0.000019", Fixed(0.0000186, 6))
	for n, want := range map[uint64]string{10000: "10000 B", 4096: "4 KiB", 64 << 20: "64 MiB", 2 << 30: "2 GiB", 1536: "1536 B"} {
		require.Equal(t, want, Bytes(n))
	}
}
