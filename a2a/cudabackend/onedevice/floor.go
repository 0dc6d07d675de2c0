package onedevice

import (
	"fmt"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	cu "github.com/ferryrdma/ferry/cuda"
)

// StepBytes is what one rank's step must move through device memory at
// least, read plus written, with tokens tokens per rank: dispatch reads
// each token once, writes each of its T*K copies into a transport buffer,
// reads it back and writes it out (T + 3*T*K rows of token and scale
// bytes); combine reads the T*K expert outputs, writes them into a
// transport buffer, reads them back to reduce them into T rows (3*T*K + T
// combine rows). Over the device's copy bandwidth it is the step's floor.
func StepBytes(l *a2a.Layout, tokens int) int64 {
	T, TK := int64(tokens), int64(tokens*l.ExpertsPerToken)
	row := int64(l.TokenBytes + l.ScaleBytes)
	return T*row + 3*TK*row + 3*TK*int64(l.CombineBytes) + T*int64(l.CombineBytes)
}

// CopyBandwidth measures c's device memory bandwidth in bytes read plus
// written per second: device-to-device copies of 1 GiB, the best of three
// (after one untimed).
func CopyBandwidth(c *cu.Context) (float64, error) {
	const size = 1 << 30
	src, err := c.Alloc(size)
	if err != nil {
		return 0, fmt.Errorf("copy bandwidth: %w", err)
	}
	defer src.Close()
	dst, err := c.Alloc(size)
	if err != nil {
		return 0, fmt.Errorf("copy bandwidth: %w", err)
	}
	defer dst.Close()
	best := time.Duration(1 << 62)
	for i := range 4 {
		t0 := time.Now()
		if err := c.CopyDtoD(dst.Ptr(), src.Ptr(), size); err != nil {
			return 0, err
		}
		if err := c.Synchronize(); err != nil {
			return 0, err
		}
		if i > 0 {
			best = min(best, time.Since(t0))
		}
	}
	return 2 * size / best.Seconds(), nil
}
