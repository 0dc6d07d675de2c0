package fabricbench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ferryrdma/ferry/fabric"
)

var errBadCase = fabric.ErrInvalidArgument

// Side is one engine with its registered buffer: the writer's source or
// the target's destination (the same buffer serves both roles in ranks
// mode, where every rank writes and is written to).
type Side struct {
	Engine *fabric.Engine
	Buf    *fabric.HostBuffer
	Reg    *fabric.MemoryRegion
	Desc   fabric.Descriptor
	Poll   fabric.PollMode
	// src and srcReg, when set, are a separate source buffer: a rank that
	// writes and is written to at once must not read from the pages its
	// peer is overwriting.
	src    *fabric.HostBuffer
	srcReg *fabric.MemoryRegion
	stray  atomic.Int64 // immediates no counter claimed
	// gpu and gpuSrc, with Spec.GPUs, hold the registered buffers in GPU
	// memory; Buf and src are then their host mirrors.
	gpu, gpuSrc *gpuBuffer
	gpuOrdinal  int

	// Serving (serve.go): srcMu is held by the case writing from the
	// source buffer; caseTimeout bounds a case; spares are private source
	// buffers of failed cases, freed after the engine closed.
	srcMu       sync.Mutex
	caseTimeout time.Duration
	// closeTimeout bounds Close (0: 30 s).
	closeTimeout time.Duration
	spareMu      sync.Mutex
	spares       []*fabric.HostBuffer
}

// AddSource gives the side a local-only source buffer of its own, the
// size of its destination buffer.
func (s *Side) AddSource() error {
	b, err := fabric.AllocHost(s.Buf.Len())
	if err != nil {
		return err
	}
	var r *fabric.MemoryRegion
	if s.gpu != nil {
		s.gpuSrc, r, err = newGPUBuffer(s.Engine, s.gpuOrdinal, uint64(b.Len()), fabric.AccessLocal)
	} else {
		r, err = s.Engine.RegisterHost(b, fabric.AccessLocal)
	}
	if err != nil {
		_ = b.Free()
		return err
	}
	s.src, s.srcReg = b, r
	return nil
}

// pushSource copies the host mirror of j's source into GPU memory after a
// pattern was written there (nothing to do for host memory).
func (s *Side) pushSource(j Job) error {
	switch {
	case j.src != nil:
		return nil // serve's private sources are host memory
	case s.src != nil && s.gpuSrc != nil:
		return s.gpuSrc.toDevice(s.src.Bytes())
	case s.src == nil && s.gpu != nil:
		return s.gpu.toDevice(s.Buf.Bytes())
	}
	return nil
}

// source returns the buffer and region writes read from.
func (s *Side) source() (*fabric.HostBuffer, *fabric.MemoryRegion) {
	if s.src != nil {
		return s.src, s.srcReg
	}
	return s.Buf, s.Reg
}

// OpenSide opens an engine for s and registers a remote-writable host
// buffer of s.Buffer bytes. Close releases both.
func OpenSide(ctx context.Context, s Spec) (*Side, error) { return openSide(ctx, s, "") }

// openSide is OpenSide for a side playing role ("server", "client",
// "rank"), which s.OnEngine hears about.
func openSide(ctx context.Context, s Spec, role string) (*Side, error) {
	cfg, err := engineConfig(s)
	if err != nil {
		return nil, err
	}
	e, err := fabric.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if s.OnEngine != nil {
		s.OnEngine(e, role)
	}
	side := &Side{Engine: e, Poll: s.Poll, caseTimeout: s.Timeout, closeTimeout: s.CloseTimeout}
	// Every immediate a case expects has a counter; anything else that
	// arrives is counted as stray and fails the verified case it lands in.
	e.OnImm(func(uint32) { side.stray.Add(1) })
	side.Buf, err = fabric.AllocHost(int(s.Buffer))
	switch {
	case err != nil:
	case len(s.GPUs) > 0:
		side.gpuOrdinal = s.GPUs[0]
		side.gpu, side.Reg, err = newGPUBuffer(e, side.gpuOrdinal, s.Buffer, sideAccess(s))
	default:
		side.Reg, err = e.RegisterHost(side.Buf, sideAccess(s))
	}
	if err == nil {
		side.Desc, err = side.Reg.Descriptor()
	}
	if err != nil {
		_ = side.Close()
		return nil, err
	}
	return side, nil
}

// Close closes the engine (which unregisters the buffer) and frees the
// buffer afterwards, never before the NIC is done with it.
func (s *Side) Close() error {
	timeout := s.closeTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := s.Engine.Close(ctx)
	if errors.Is(err, fabric.ErrAbandoned) {
		// A worker stuck in a provider call may still use them: leak.
		return fmt.Errorf("close engine: %w", err)
	}
	if err != nil {
		err = fmt.Errorf("close engine: %w", err)
	}
	s.spareMu.Lock()
	bufs := append([]*fabric.HostBuffer{s.Buf, s.src}, s.spares...)
	s.spares = nil
	s.spareMu.Unlock()
	for _, b := range bufs {
		if b != nil {
			if ferr := b.Free(); err == nil {
				err = ferr
			}
		}
	}
	if gerr := errors.Join(s.gpu.close(), s.gpuSrc.close()); err == nil {
		err = gerr
	}
	s.gpu, s.gpuSrc = nil, nil
	return err
}

// Info describes the side for report headers and the control channel.
func (s *Side) Info() PeerInfo {
	in := s.Engine.Info()
	p := PeerInfo{Provider: in.Provider, Transport: in.Transport, Reason: in.Reason, NICs: s.Engine.NICs(), Poll: in.Poll.String(),
		LinkSpeed: in.LinkSpeed, Buffer: uint64(s.Buf.Len())}
	for _, g := range in.Groups {
		for _, d := range g.Domains {
			p.Domains = append(p.Domains, fmt.Sprintf("%s:%s#%d", g.Device, d.Name, d.Index))
		}
	}
	return p
}

// PeerInfo is what one side tells the other about itself.
type PeerInfo struct {
	Provider  string `json:"provider"`
	Transport string `json:"transport"`
	Reason    string `json:"reason,omitempty"`
	NICs      int    `json:"nics"`
	Poll      string `json:"poll"`
	LinkSpeed uint64 `json:"link_speed_bps"`
	Buffer    uint64 `json:"buffer"`
	// Domains names each NIC as device:name#index ("host:lo#1").
	Domains []string `json:"domains,omitempty"`
}

// Job is one case as the writer runs it.
type Job struct {
	Case Case
	Dst  fabric.Descriptor
	Seed uint64  // fill seed of verified cases and page-index seed
	Span uint64  // bytes of the buffers the layout must fit (the smaller side)
	Rank int     // the writer's rank, mixed into the fill pattern
	Imm  uint32  // immediate of verified cases
	src  *source // when set, the buffer to write from instead of the side's
}

// jobSource returns the buffer and region j writes from.
func (s *Side) jobSource(j Job) (*fabric.HostBuffer, *fabric.MemoryRegion) {
	if j.src != nil {
		return j.src.buf, j.src.reg
	}
	return s.source()
}

// Write runs j from s: fills the source pages of a checked case, then
// times every iteration from the first submit to the last completion at
// the writer (as the reference does), and returns the timed latencies.
// Warmup iterations are run and dropped. A checked write case then runs
// once more, untimed, with an immediate on every write (one per page, one
// per NIC shard): the target waits for exactly those and then compares
// the bytes, so the check covers the very request that was timed.
func (s *Side) Write(ctx context.Context, j Job) ([]time.Duration, error) {
	c := j.Case
	if c.Iters < 1 || c.Warmup < 0 {
		return nil, fmt.Errorf("%s: iters %d, warmup %d: %w", c.Workload, c.Iters, c.Warmup, errBadCase)
	}
	if j.Span > uint64(s.Buf.Len()) {
		return nil, fmt.Errorf("%s: span %d larger than the writer's %d bytes: %w", c.Workload, j.Span, s.Buf.Len(), errBadCase)
	}
	l, err := NewLayout(c, j.Seed, j.Span)
	if err != nil {
		return nil, err
	}
	if c.Workload == Read {
		return s.read(ctx, j, l)
	}
	if c.Verify && c.Workload != Imm {
		buf, _ := s.jobSource(j)
		fillCase(buf.Bytes(), c, l, j.Seed, j.Rank)
		if err := s.pushSource(j); err != nil {
			return nil, err
		}
	}
	tc := new(fabric.TransferCounter)
	done := fabric.Count(tc)
	if dl, ok := ctx.Deadline(); ok {
		// A peer that stops answering fails the case's writes at its
		// deadline (fenced in the engine) instead of holding them.
		done = done.WithDeadline(dl)
	}
	submit, check, err := s.submitter(c, l, j, done)
	if err != nil {
		return nil, err
	}
	what := func(it int) string {
		if it == c.Iters {
			return fmt.Sprintf("%s %s check pass", c.Workload, FormatBytes(c.Bytes))
		}
		return fmt.Sprintf("%s %s iteration %d", c.Workload, FormatBytes(c.Bytes), it)
	}
	lat := make([]time.Duration, 0, c.Iters)
	var n int64
	last := c.Iters
	if check != nil {
		last++
	}
	for it := -c.Warmup; it < last; it++ {
		sub := submit
		if it == c.Iters {
			sub = check
		}
		t0 := time.Now()
		if err := sub(); err != nil {
			return nil, fmt.Errorf("%s: %w", what(it), err)
		}
		n++
		if err := waitDone(ctx, tc, n, s.Poll); err != nil {
			return nil, fmt.Errorf("%s: waiting for completion: %w", what(it), err)
		}
		d := time.Since(t0)
		if tc.Errors() > 0 {
			return nil, fmt.Errorf("%s: %d transfers failed, the first with: %w", what(it), tc.Errors(), tc.Err())
		}
		if it >= 0 && it < c.Iters {
			lat = append(lat, d)
		}
	}
	return lat, nil
}

// submitter builds the requests of a case once and returns the calls that
// submit one timed iteration and the check pass (nil when the case is not
// checked or is the immediate case, whose timed writes are the checked
// ones).
func (s *Side) submitter(c Case, l Layout, j Job, done fabric.Completion) (timed, check func() error, err error) {
	e := s.Engine
	_, src := s.jobSource(j)
	withImm := c.Verify && c.Workload != Imm
	switch c.Workload {
	case Imm:
		r := fabric.ImmWrite{Imm: ImmValue, Dst: j.Dst, Route: fabric.Pinned(0)}
		return func() error { return e.SubmitImm(r, done) }, nil, nil
	case Single:
		r := fabric.SingleWrite{Src: src, SrcOffset: Offset, Length: c.Bytes, Dst: j.Dst, DstOffset: Offset,
			Route: fabric.Sharded(0)}
		rc := r
		rc.Imm = fabric.Immediate(j.Imm)
		timed = func() error { return e.SubmitSingle(r, done) }
		if withImm {
			check = func() error { return e.SubmitSingle(rc, done) }
		}
		return timed, check, nil
	case Paged:
		r := fabric.PagedWrite{Src: src, SrcPages: l.Indices, SrcStride: l.Stride, SrcOffset: Offset,
			Dst: j.Dst, DstPages: l.Indices, DstStride: l.Stride, DstOffset: Offset, Length: c.Bytes}
		rc := r
		rc.Imm = fabric.Immediate(j.Imm)
		timed = func() error { return e.SubmitPaged(r, done) }
		if withImm {
			check = func() error { return e.SubmitPaged(rc, done) }
		}
		return timed, check, nil
	}
	return nil, nil, fmt.Errorf("workload %q: %w", c.Workload, errBadCase)
}

// waitDone waits for the counter to reach n. Spin mode only yields to
// other goroutines, for the lowest latency; adaptive mode yields for a
// short while, then sleeps in short steps so a waiting benchmark leaves
// the cores to the workers (these machines have two), precise to tens of
// microseconds. Both are bounded by ctx.
var waitStep = unix.NsecToTimespec(int64(10 * time.Microsecond))

func waitDone(ctx context.Context, tc *fabric.TransferCounter, n int64, poll fabric.PollMode) error {
	const yieldFor = 200 * time.Microsecond
	var start time.Time
	for i := 0; tc.Done() < n; i++ {
		runtime.Gosched()
		if i&255 != 255 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: %w", fabric.ErrTimeout, err)
		}
		if poll == fabric.PollSpin {
			continue
		}
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) > yieldFor {
			// Not time.Sleep: the runtime rounds sub-millisecond sleeps up
			// to about a millisecond, which would add up to that much to
			// the timed latency of a case (a tenth of a 64 MiB write).
			_ = unix.Nanosleep(&waitStep, nil)
		}
	}
	return nil
}

// Target is the receiving half of a checked case: it poisons the
// destination, counts the case's immediates from before the first write
// (the check pass's, or every iteration's for the imm case), then waits
// for all of them and checks every byte.
type Target struct {
	side    *Side
	c       Case
	l       Layout
	counter *fabric.ImmCounter
	imm     uint32
	want    int64
	corrupt func([]byte)
	stray   int64 // the side's stray count when the case began
}

// Expect prepares s to receive a verified case written by a writer with
// nics NICs (j.Dst, s's descriptor, lists s's own). Call it before the
// writer starts.
func (s *Side) Expect(j Job, nics int, corrupt func([]byte)) (*Target, error) {
	c := j.Case
	l, err := NewLayout(c, j.Seed, j.Span)
	if err != nil {
		return nil, err
	}
	imm := j.Imm
	if c.Workload == Imm {
		imm = ImmValue
	} else {
		poisonCase(s.Buf.Bytes(), c, l)
		if s.gpu != nil {
			if err := s.gpu.toDevice(s.Buf.Bytes()); err != nil {
				return nil, err
			}
		}
	}
	ctr, err := s.Engine.ImmCounter(imm)
	if err != nil {
		return nil, err
	}
	want := immsPerTransfer(c, nics, len(j.Dst.NICs)) // the check pass
	if c.Workload == Imm {
		want = int64(c.Iters + c.Warmup)
	}
	return &Target{side: s, c: c, l: l, counter: ctr, imm: imm,
		want: want, corrupt: corrupt, stray: s.stray.Load()}, nil
}

// Check waits for every immediate of the case (up to ctx), checks that no
// extra one came, then compares the bytes written by the writer of rank.
// It always removes the counter.
func (t *Target) Check(ctx context.Context, seed uint64, rank int) error {
	defer t.side.Engine.RemoveImmCount(t.imm)
	if err := t.counter.Wait(ctx, t.want); err != nil {
		return fmt.Errorf("%s %s: waiting for %d immediates (%d short): %w: %w",
			t.c.Workload, FormatBytes(t.c.Bytes), t.want, -t.counter.Count(), ErrVerify, err)
	}
	if extra := t.counter.Count(); extra != 0 {
		return fmt.Errorf("%s %s: %d immediates more than the %d expected: %w",
			t.c.Workload, FormatBytes(t.c.Bytes), extra, t.want, ErrVerify)
	}
	if n := t.side.stray.Load() - t.stray; n != 0 {
		return fmt.Errorf("%s %s: %d immediates with an unexpected value arrived: %w",
			t.c.Workload, FormatBytes(t.c.Bytes), n, ErrVerify)
	}
	if t.c.Workload == Imm {
		return nil
	}
	buf := t.side.Buf.Bytes()
	if t.side.gpu != nil {
		if err := t.side.gpu.toHost(buf); err != nil {
			return err
		}
	}
	if t.corrupt != nil {
		// The hook sees the first checked page, so any change it makes
		// must be caught.
		o := uint64(Offset)
		if t.c.Workload == Paged {
			o = t.l.pageOffset(0)
		}
		t.corrupt(buf[o : o+t.c.Bytes])
	}
	return checkCase(buf, t.c, t.l, seed, rank)
}

// Cancel gives up on the case (the writer failed) and removes the counter.
func (t *Target) Cancel() { t.side.Engine.RemoveImmCount(t.imm) }
