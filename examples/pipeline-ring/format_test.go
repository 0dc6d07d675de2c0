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
