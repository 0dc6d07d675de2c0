package main

import (
	"errors"
	"testing"

	"github.com/ferryrdma/ferry/fabric/job"
)

func TestParseSize(t *testing.T) {
	for s, want := range map[string]int64{"64": 64, "4K": 4096, "2M": 2 << 20, "1G": 1 << 30, "16KiB": 16384} {
		if got, err := parseSize(s); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0", "-4K", "x"} {
		if _, err := parseSize(s); !errors.Is(err, job.ErrUsage) {
			t.Errorf("%q: %v, want job.ErrUsage", s, err)
		}
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("16K, 256K,2M")
	if err != nil || len(got) != 3 || got[0] != 16<<10 || got[1] != 256<<10 || got[2] != 2<<20 {
		t.Errorf("parseSizes: %v %v", got, err)
	}
	if _, err := parseSizes("16K,,2M"); !errors.Is(err, job.ErrUsage) {
		t.Errorf("an empty entry: %v, want job.ErrUsage", err)
	}
}
