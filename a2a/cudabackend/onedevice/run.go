package onedevice

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/workload"
)

// Mode is how the ranks' launches are queued.
type Mode int

const (
	// LockStep queues every rank's phase N on its stream, waits for all of
	// them, then phase N+1: no launch ever waits for one queued after it,
	// so it works whatever the device can hold at once.
	LockStep Mode = iota
	// Concurrent gives each rank a goroutine queueing its four launches on
	// its own stream: every rank's kernels must be resident together (on a
	// GPU, grids of at most SMs/W blocks). Co-residency is not guaranteed,
	// so the watchdog bounds every step.
	Concurrent
)

func (m Mode) String() string {
	switch m {
	case LockStep:
		return "lockstep"
	case Concurrent:
		return "concurrent"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode reads "lockstep" or "concurrent".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "lockstep", "lock-step":
		return LockStep, nil
	case "concurrent":
		return Concurrent, nil
	}
	return 0, fmt.Errorf("mode %q: want lockstep or concurrent: %w", s, a2a.ErrInvalidArgument)
}

func bytesOf[T any](v []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(z)))
}

func (w *World) upload(m cudabackend.Memory, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return w.dev.Upload(m.Addr(), b)
}

func (w *World) download(b []byte, m cudabackend.Memory) error {
	if len(b) == 0 {
		return nil
	}
	return w.dev.Download(b, m.Addr())
}

// poison fills every output of rank r with a pattern no result has.
func (w *World) poison(r int) error {
	l, io := &w.L, w.io[r]
	for _, m := range []struct {
		mem cudabackend.Memory
		n   int
	}{{io.outX, l.OutputRows * l.TokenBytes}, {io.outS, 4 * l.OutputRows * l.Scales}, {io.tok, 4 * l.LocalExperts},
		{io.off, 4 * (l.LocalExperts + 1)}} {
		b := make([]byte, m.n)
		for i := range b {
			b[i] = 0xa5
		}
		if err := w.upload(m.mem, b); err != nil {
			return err
		}
	}
	return nil
}

// Load puts the inputs of it in every rank's device memory, poisons the
// outputs and returns each rank's launches. With boundM the launches read
// the token count from device memory (SetTokens), so the same launches
// serve any count.
func (w *World) Load(it *workload.Iteration, boundM bool) ([][4]cudabackend.Launch, error) {
	l := &w.L
	steps := make([][4]cudabackend.Launch, len(w.Backends))
	for r, b := range w.Backends {
		io, g := w.io[r], &it.Groups[l.Group(r)]
		for _, u := range []struct {
			m cudabackend.Memory
			b []byte
		}{{io.x, g.X}, {io.scales, bytesOf(g.Scales)}, {io.idx, bytesOf(g.Indices)}, {io.w, bytesOf(g.Weights)},
			{io.y, it.Ys[r]}, {io.out, it.Prev[l.Group(r)]}} {
			if err := w.upload(u.m, u.b); err != nil {
				return nil, err
			}
		}
		if err := w.poison(r); err != nil {
			return nil, err
		}
		d := cudabackend.DeviceIO{Tokens: uint32(g.Tokens), X: io.x.Addr(), Scales: io.scales.Addr(), Indices: io.idx.Addr(),
			OutX: io.outX.Addr(), OutScales: io.outS.Addr(), ExpertTokens: io.tok.Addr(), ExpertOffsets: io.off.Addr(),
			Y: io.y.Addr(), Out: io.out.Addr(), Weights: io.w.Addr(), Accumulate: it.Accumulate, Timeout: w.watchdog}
		if l.Scales == 0 {
			d.Scales, d.OutScales = 0, 0
		}
		if boundM {
			d.BoundM = io.boundM.Addr()
		}
		var err error
		if steps[r], err = b.Steps(d); err != nil {
			return nil, err
		}
	}
	return steps, nil
}

// SetTokens writes the token count launches made with boundM read.
func (w *World) SetTokens(m int) error {
	b := binary.LittleEndian.AppendUint32(nil, uint32(m))
	for r := range w.Backends {
		if err := w.upload(w.io[r].boundM, b); err != nil {
			return err
		}
	}
	return nil
}

// Check compares every rank's outputs with the oracle's answers for it.
func (w *World) Check(it *workload.Iteration) error {
	l := &w.L
	for r := range w.Backends {
		io := w.io[r]
		out := a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), ExpertOffsets: make([]int32, l.LocalExperts+1),
			X: make([]byte, l.OutputRows*l.TokenBytes), Scales: make([]float32, l.OutputRows*l.Scales)}
		for _, d := range []struct {
			b []byte
			m cudabackend.Memory
		}{{out.X, io.outX}, {bytesOf(out.Scales), io.outS}, {bytesOf(out.ExpertTokens), io.tok}, {bytesOf(out.ExpertOffsets), io.off}} {
			if err := w.download(d.b, d.m); err != nil {
				return err
			}
		}
		if err := workload.Compare(l, &it.Want[r], &out); err != nil {
			return fmt.Errorf("rank %d dispatch: %w", r, err)
		}
		want := it.WantOut[l.Group(r)]
		got := make([]byte, len(want))
		if err := w.download(got, io.out); err != nil {
			return err
		}
		if string(got) != string(want) {
			return fmt.Errorf("rank %d: combine output differs from the oracle", r)
		}
	}
	return nil
}

// StepError is a step that did not complete. Err is a *cudabackend.KernelError
// when a kernel gave up waiting (it wraps a2a.ErrTimeout and names what
// it awaited), or wraps a2a.ErrTimeout when the watchdog found a rank's
// launches still running after their own timeout.
type StepError struct {
	Mode  Mode
	Rank  int
	Phase cudabackend.Phase // the phase at fault, where known
	Err   error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("onedevice %v step: rank %d %v: %v", e.Mode, e.Rank, e.Phase, e.Err)
}

func (e *StepError) Unwrap() error { return e.Err }

// Epoch is the number of steps the kernels have run.
func (w *World) Epoch() uint32 {
	e, _ := w.Backends[0].Status(cudabackend.PhaseCombineRecv)
	return e
}

// status checks the last launch of phase on every rank that had one in
// steps (nil: every rank).
func (w *World) status(mode Mode, phase cudabackend.Phase, epoch uint32, steps [][4]cudabackend.Launch) error {
	for r, b := range w.Backends {
		if steps != nil && steps[r][phase].Kernel.IsZero() {
			continue
		}
		got, err := b.Status(phase)
		if err != nil {
			return &StepError{Mode: mode, Rank: r, Phase: phase, Err: err}
		}
		if got != epoch {
			return &StepError{Mode: mode, Rank: r, Phase: phase,
				Err: fmt.Errorf("ran epoch %d, want %d: %w", got, epoch, cudabackend.ErrKernel)}
		}
	}
	return nil
}

// grace is how long the watchdog waits past the kernels' own timeout.
const grace = 10 * time.Second

// wait waits for rank r's stream until the watchdog's deadline.
func (w *World) wait(ctx context.Context, mode Mode, r int, phase cudabackend.Phase) error {
	if err := w.Backends[r].Stream().Sync(ctx); err != nil {
		return &StepError{Mode: mode, Rank: r, Phase: phase, Err: fmt.Errorf("launches still running past the watchdog (%v a wait): %w: %w",
			w.watchdog, a2a.ErrTimeout, err)}
	}
	return nil
}

// Run runs one step: the launches of every rank (from Load) queued in
// mode, every launch's status checked. It returns how long each phase
// took in lock step (host clock around the launches of every rank and
// their completion) and the whole step. A zero Launch is not queued.
//
// The watchdog: every wait of a kernel gives up after Options.Watchdog,
// ending the launch with a timeout status, and the host waits for a phase
// (lock step) or for a rank's four launches (concurrent: each may wait
// its full timeout) at most that long plus a grace period; either way the
// step ends with a *StepError.
func (w *World) Run(ctx context.Context, mode Mode, steps [][4]cudabackend.Launch) (phases [4]time.Duration, step time.Duration, err error) {
	epoch := w.Epoch() + 1
	t0 := time.Now()
	switch mode {
	case LockStep:
		for p := cudabackend.PhaseDispatchSend; p <= cudabackend.PhaseCombineRecv; p++ {
			tp := time.Now()
			ctx, cancel := context.WithTimeout(ctx, w.watchdog+grace)
			defer cancel()
			for r, b := range w.Backends {
				if steps[r][p].Kernel.IsZero() {
					continue
				}
				if err := steps[r][p].Run(b.Stream()); err != nil {
					return phases, 0, &StepError{Mode: mode, Rank: r, Phase: p, Err: err}
				}
			}
			for r := range w.Backends {
				if err := w.wait(ctx, mode, r, p); err != nil {
					return phases, 0, err
				}
			}
			phases[p] = time.Since(tp)
			if err := w.status(mode, p, epoch, steps); err != nil {
				return phases, 0, err
			}
		}
	case Concurrent:
		ctx, cancel := context.WithTimeout(ctx, 4*w.watchdog+grace)
		defer cancel()
		errs := make([]error, len(w.Backends))
		var wg sync.WaitGroup
		for r, b := range w.Backends {
			wg.Go(func() {
				for p, s := range steps[r] {
					if s.Kernel.IsZero() {
						continue
					}
					if err := s.Run(b.Stream()); err != nil {
						errs[r] = &StepError{Mode: mode, Rank: r, Phase: cudabackend.Phase(p), Err: err}
						return
					}
				}
				errs[r] = w.wait(ctx, mode, r, cudabackend.PhaseCombineRecv)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return phases, 0, err
		}
		// A kernel that gave up names what it awaited; the earliest phase
		// that failed is the cause.
		for p := cudabackend.PhaseDispatchSend; p <= cudabackend.PhaseCombineRecv; p++ {
			if err := w.status(mode, p, epoch, steps); err != nil {
				return phases, 0, err
			}
		}
	default:
		return phases, 0, fmt.Errorf("onedevice: %v: %w", mode, a2a.ErrInvalidArgument)
	}
	return phases, time.Since(t0), nil
}

// Iterate runs iters steps in mode, new random inputs each, and checks
// every rank against the oracle after each.
func (w *World) Iterate(ctx context.Context, mode Mode, seed uint64, iters int) error {
	rng := rand.New(rand.NewPCG(seed, 5))
	for i := 0; i < iters; i++ {
		it, err := workload.NewIteration(rng, w.Cfg, &w.L)
		if err != nil {
			return err
		}
		steps, err := w.Load(it, false)
		if err != nil {
			return err
		}
		if _, _, err := w.Run(ctx, mode, steps); err != nil {
			return fmt.Errorf("%v iteration %d: %w", mode, i, err)
		}
		if err := w.Check(it); err != nil {
			return fmt.Errorf("%v iteration %d: %w", mode, i, err)
		}
	}
	return nil
}
