package job_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/job"
)

func TestParseSize(t *testing.T) {
	for s, want := range map[string]int64{"64": 64, "4K": 4096, "2M": 2 << 20, "1G": 1 << 30, "16KiB": 16384} {
		if got, err := job.ParseSize(s); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0", "-4K", "x"} {
		if _, err := job.ParseSize(s); !errors.Is(err, job.ErrUsage) {
			t.Errorf("%q: %v, want job.ErrUsage", s, err)
		}
	}
}

func TestParseSizes(t *testing.T) {
	got, err := job.ParseSizes("16K, 256K,2M")
	if err != nil || len(got) != 3 || got[0] != 16<<10 || got[1] != 256<<10 || got[2] != 2<<20 {
		t.Errorf("ParseSizes: %v %v", got, err)
	}
	if _, err := job.ParseSizes("16K,,2M"); !errors.Is(err, job.ErrUsage) {
		t.Errorf("an empty entry: %v, want job.ErrUsage", err)
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{100: "100 B", 4096: "4 KiB", 1536: "1.5 KiB", 3 << 20: "3 MiB",
		3<<20 + 1<<19: "3.5 MiB", 2 << 30: "2 GiB", 5 << 28: "1.25 GiB"} {
		if got := job.FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestSummarize(t *testing.T) {
	if s := job.Summarize(nil); s != (job.Summary{}) {
		t.Errorf("no durations: %+v", s)
	}
	d := make([]time.Duration, 100)
	for i := range d {
		d[i] = time.Duration(100-i) * time.Microsecond // 100 µs down to 1 µs
	}
	s := job.Summarize(d)
	want := job.Summary{N: 100, Min: 1, P50: 51, P99: 100, Max: 100, Mean: 50.5}
	if s != want {
		t.Errorf("Summarize: %+v, want %+v", s, want)
	}
}

func TestTable(t *testing.T) {
	var b strings.Builder
	tb := job.NewTable(&b, "size", "GB/s")
	tb.Row("64 KiB", "1.5")
	tb.Row("1 MiB", "12.25")
	if err := tb.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "    size   GB/s\n  64 KiB    1.5\n   1 MiB  12.25\n"
	if b.String() != want {
		t.Errorf("table:\n%q\nwant\n%q", b.String(), want)
	}
}
