package fabricbench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ferryrdma/ferry/fabric"
)

// The read workload: the side that runs a case (the server of a
// client/server pair, the writer of the other workloads) pulls Bytes from
// the peer's region at Offset into its own source buffer with
// SubmitRead, sharded over its NICs. A checked case has the peer fill its
// range with the pattern first; the reader poisons its range, reads once
// more untimed and compares every byte, so a case reported as verified
// moved the peer's bytes.

// sideAccess is what a side registers its peer-facing buffer with: remote
// read as well when the spec runs reads (a transport without reads then
// refuses at registration, saying so).
func sideAccess(s Spec) fabric.Access {
	if slices.Contains(s.Workloads, Read) {
		return fabric.AccessRemoteWrite | fabric.AccessRemoteRead
	}
	return fabric.AccessRemoteWrite
}

// refuseRead refuses the read workload in the modes that cannot run it.
func refuseRead(s Spec, mode string) error {
	if slices.Contains(s.Workloads, Read) {
		return fmt.Errorf("the read workload runs in loopback and client/server mode only, not %s: %w",
			mode, fabric.ErrInvalidArgument)
	}
	return nil
}

// offerRead fills the range a reader will read with the case's pattern.
func (s *Side) offerRead(j Job) error {
	if s.gpu != nil {
		return fmt.Errorf("read: checked reads of GPU memory: %w", fabric.ErrNotSupported)
	}
	l, err := NewLayout(j.Case, j.Seed, j.Span)
	if err != nil {
		return err
	}
	fillCase(s.Buf.Bytes(), j.Case, l, j.Seed, 0)
	return nil
}

// read runs a read case from s (see above) and returns the timed
// latencies.
func (s *Side) read(ctx context.Context, j Job, l Layout) ([]time.Duration, error) {
	c := j.Case
	buf, reg := s.jobSource(j)
	if s.gpuSrc != nil {
		return nil, fmt.Errorf("read into GPU memory: %w", fabric.ErrNotSupported)
	}
	tc := new(fabric.TransferCounter)
	done := fabric.Count(tc)
	if dl, ok := ctx.Deadline(); ok {
		done = done.WithDeadline(dl)
	}
	r := fabric.SingleRead{Dst: reg, DstOffset: Offset, Length: c.Bytes, Src: j.Dst, SrcOffset: Offset,
		Route: fabric.Sharded(0)}
	last := c.Iters
	if c.Verify {
		last++
	}
	lat := make([]time.Duration, 0, c.Iters)
	var n int64
	for it := -c.Warmup; it < last; it++ {
		what := fmt.Sprintf("%s %s iteration %d", c.Workload, FormatBytes(c.Bytes), it)
		if it == c.Iters {
			what = fmt.Sprintf("%s %s check pass", c.Workload, FormatBytes(c.Bytes))
			poisonCase(buf.Bytes(), c, l)
		}
		t0 := time.Now()
		if err := s.Engine.SubmitRead(r, done); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		n++
		if err := waitDone(ctx, tc, n, s.Poll); err != nil {
			return nil, fmt.Errorf("%s: waiting for completion: %w", what, err)
		}
		d := time.Since(t0)
		if tc.Errors() > 0 {
			return nil, fmt.Errorf("%s: %d transfers failed, the first with: %w", what, tc.Errors(), tc.Err())
		}
		if it >= 0 && it < c.Iters {
			lat = append(lat, d)
		}
	}
	if c.Verify {
		if err := checkCase(buf.Bytes(), c, l, j.Seed, 0); err != nil {
			return nil, err
		}
	}
	return lat, nil
}
