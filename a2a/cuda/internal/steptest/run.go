package steptest

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cuda"
	"github.com/ferryrdma/ferry/a2a/internal/workload"
	"github.com/ferryrdma/ferry/a2a/reference"
)

// Mode is how the ranks' launches are queued.
type Mode int

const (
	// LockStep queues every rank's phase N, waits for all of them, then
	// phase N+1: no launch ever waits for one queued after it, so it works
	// whatever the device can hold at once.
	LockStep Mode = iota
	// Concurrent gives each rank a goroutine queueing its four launches on
	// its own stream: every rank's kernels must be resident together (on a
	// GPU, grids of at most SMs/W blocks).
	Concurrent
)

func (m Mode) String() string { return [...]string{"lock-step", "concurrent"}[m] }

func bytesOf[T any](v []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(z)))
}

func (w *World) upload(tb testing.TB, m cuda.Memory, b []byte) {
	tb.Helper()
	if len(b) == 0 {
		return
	}
	if err := w.dev.Upload(m.Addr(), b); err != nil {
		tb.Fatal(err)
	}
}

func (w *World) download(tb testing.TB, b []byte, m cuda.Memory) {
	tb.Helper()
	if len(b) == 0 {
		return
	}
	if err := w.dev.Download(b, m.Addr()); err != nil {
		tb.Fatal(err)
	}
}

// poison fills every output with a pattern no result has.
func (w *World) poison(tb testing.TB, r int) {
	l, io := &w.L, w.io[r]
	for _, m := range []struct {
		mem cuda.Memory
		n   int
	}{{io.outX, l.OutputRows * l.TokenBytes}, {io.outS, 4 * l.OutputRows * l.Scales}, {io.tok, 4 * l.LocalExperts},
		{io.off, 4 * (l.LocalExperts + 1)}} {
		b := make([]byte, m.n)
		for i := range b {
			b[i] = 0xa5
		}
		w.upload(tb, m.mem, b)
	}
}

// load puts iteration it's inputs of rank r in device memory and returns
// its launches.
func (w *World) load(tb testing.TB, r int, it *workload.Iteration, boundM bool) [4]cuda.Launch {
	tb.Helper()
	l, io := &w.L, w.io[r]
	g := &it.Groups[l.Group(r)]
	w.upload(tb, io.x, g.X)
	w.upload(tb, io.scales, bytesOf(g.Scales))
	w.upload(tb, io.idx, bytesOf(g.Indices))
	w.upload(tb, io.w, bytesOf(g.Weights))
	w.upload(tb, io.y, it.Ys[r])
	w.upload(tb, io.out, it.Prev[l.Group(r)])
	w.poison(tb, r)
	d := cuda.DeviceIO{Tokens: uint32(g.Tokens), X: io.x.Addr(), Scales: io.scales.Addr(), Indices: io.idx.Addr(),
		OutX: io.outX.Addr(), OutScales: io.outS.Addr(), ExpertTokens: io.tok.Addr(), ExpertOffsets: io.off.Addr(),
		Y: io.y.Addr(), Out: io.out.Addr(), Weights: io.w.Addr(), Accumulate: it.Accumulate}
	if l.Scales == 0 {
		d.Scales, d.OutScales = 0, 0
	}
	if boundM {
		d.BoundM = io.boundM.Addr()
	}
	steps, err := w.Backends[r].Steps(d)
	if err != nil {
		tb.Fatal(err)
	}
	return steps
}

// check compares rank r's outputs with the oracle's.
func (w *World) check(tb testing.TB, r int, it *workload.Iteration) error {
	l, io := &w.L, w.io[r]
	out := a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), ExpertOffsets: make([]int32, l.LocalExperts+1),
		X: make([]byte, l.OutputRows*l.TokenBytes), Scales: make([]float32, l.OutputRows*l.Scales)}
	w.download(tb, out.X, io.outX)
	w.download(tb, bytesOf(out.Scales), io.outS)
	w.download(tb, bytesOf(out.ExpertTokens), io.tok)
	w.download(tb, bytesOf(out.ExpertOffsets), io.off)
	if err := workload.Compare(l, &it.Want[r], &out); err != nil {
		return fmt.Errorf("rank %d dispatch: %w", r, err)
	}
	want := it.WantOut[l.Group(r)]
	got := make([]byte, len(want))
	w.download(tb, got, io.out)
	if string(got) != string(want) {
		return fmt.Errorf("rank %d: combine output differs from the oracle", r)
	}
	return nil
}

// run queues the launches of every rank in mode and waits for them.
func (w *World) run(tb testing.TB, mode Mode, steps [][4]cuda.Launch, epoch uint32, timeout time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	wait := func(r int) error { return w.Backends[r].Stream().Sync(ctx) }
	switch mode {
	case LockStep:
		for p := cuda.PhaseDispatchSend; p <= cuda.PhaseCombineRecv; p++ {
			for r, b := range w.Backends {
				if err := steps[r][p].Run(b.Stream()); err != nil {
					tb.Fatal(err)
				}
			}
			for r := range w.Backends {
				if err := wait(r); err != nil {
					tb.Fatalf("%v rank %d: %v", p, r, err)
				}
			}
			if err := w.status(p, epoch); err != nil {
				tb.Fatal(err)
			}
		}
	case Concurrent:
		errs := make([]error, len(w.Backends))
		var wg sync.WaitGroup
		for r, b := range w.Backends {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, s := range steps[r] {
					if err := s.Run(b.Stream()); err != nil {
						errs[r] = err
						return
					}
				}
				errs[r] = wait(r)
			}()
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				tb.Fatalf("rank %d: %v", r, err)
			}
		}
		for p := cuda.PhaseDispatchSend; p <= cuda.PhaseCombineRecv; p++ {
			if err := w.status(p, epoch); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// Iterate runs iters iterations in mode, new random inputs each, and
// checks every rank against the oracle after each.
func (w *World) Iterate(tb testing.TB, mode Mode, seed uint64, iters int) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, 5))
	for i := 0; i < iters; i++ {
		it, err := workload.NewIteration(rng, w.Cfg, &w.L)
		if err != nil {
			tb.Fatal(err)
		}
		steps := make([][4]cuda.Launch, len(w.Backends))
		for r := range w.Backends {
			steps[r] = w.load(tb, r, it, false)
		}
		w.run(tb, mode, steps, w.epoch()+1, time.Minute)
		for r := range w.Backends {
			if err := w.check(tb, r, it); err != nil {
				tb.Fatalf("%v iteration %d: %v", mode, i, err)
			}
		}
	}
}

// epoch is the number of iterations the kernels have run.
func (w *World) epoch() uint32 {
	e, _ := w.Backends[0].Status(cuda.PhaseCombineRecv)
	return e
}

// Replayer runs the same launches of one rank again: a CUDA graph
// captured once and launched per replay, or the launches queued again.
type Replayer interface {
	// Record takes the launches of every rank (in lock-step order) once.
	Record(tb testing.TB, w *World, steps [][4]cuda.Launch)
	// Replay runs them once more and waits.
	Replay(tb testing.TB, w *World)
}

// Requeue replays by queueing the recorded launches again, in lock step.
type Requeue struct{ steps [][4]cuda.Launch }

func (q *Requeue) Record(tb testing.TB, w *World, steps [][4]cuda.Launch) { q.steps = steps }

func (q *Requeue) Replay(tb testing.TB, w *World) {
	w.run(tb, LockStep, q.steps, w.epoch()+1, time.Minute)
}

// Replay records one set of launches per rank over fixed buffers, with the
// token count in device memory, then runs it replays times: before each
// the host only writes new data into the buffers (tokens, routing, expert
// outputs, a new token count), never a launch argument; after each every
// rank is checked against the oracle.
func (w *World) Replay(tb testing.TB, rp Replayer, seed uint64, replays int) {
	tb.Helper()
	l := &w.L
	rng := rand.New(rand.NewPCG(seed, 6))
	// Full-size inputs: every group has MaxTokens tokens; each replay uses
	// a prefix of them, bound_m tokens.
	full := make([]reference.Group, l.Groups)
	for h := range full {
		for full[h].Tokens < l.MaxTokens {
			full[h] = workload.RandomGroups(rng, l, rng.IntN(2) == 0)[h]
		}
	}
	steps := make([][4]cuda.Launch, len(w.Backends))
	for k := 0; k < replays; k++ {
		m := rng.IntN(l.MaxTokens + 1)
		if k == 0 {
			m = l.MaxTokens
		}
		it, err := truncated(w.Cfg, l, full, m, rng)
		if err != nil {
			tb.Fatal(err)
		}
		for r := range w.Backends {
			s := w.load(tb, r, it, true)
			if k == 0 {
				steps[r] = s
			}
			b := binary.LittleEndian.AppendUint32(nil, uint32(m))
			w.upload(tb, w.io[r].boundM, b)
		}
		if k == 0 {
			rp.Record(tb, w, steps)
		}
		rp.Replay(tb, w)
		for r := range w.Backends {
			if err := w.check(tb, r, it); err != nil {
				tb.Fatalf("replay %d (%d tokens): %v", k, m, err)
			}
		}
	}
}

// truncated is the iteration whose groups are the first m tokens of full,
// with fixed accumulation (launch arguments do not change between
// replays) and new expert outputs.
func truncated(cfg a2a.Config, l *a2a.Layout, full []reference.Group, m int, rng *rand.Rand) (*workload.Iteration, error) {
	it := &workload.Iteration{Groups: make([]reference.Group, len(full)), Accumulate: true}
	K := l.ExpertsPerToken
	for h, g := range full {
		it.Groups[h] = reference.Group{Tokens: m, X: g.X[:m*l.TokenBytes], Scales: g.Scales[:m*l.Scales],
			Indices: g.Indices[:m*K], Weights: g.Weights[:m*K]}
	}
	var err error
	if it.Want, err = reference.Dispatch(cfg, it.Groups); err != nil {
		return nil, err
	}
	it.Ys = workload.ExpertOutputs(l, it.Want)
	it.Prev = make([][]byte, len(full))
	for h := range it.Prev {
		it.Prev[h] = make([]byte, m*l.CombineBytes)
		for i := 0; i < m*l.Hidden; i++ {
			a2a.EncodeFloat32(l.CombineType, it.Prev[h], i, float32(math.Round(float64(rng.Float32()*8)))/8)
		}
	}
	it.WantOut, err = reference.Combine(cfg, it.Groups, it.Want, it.Ys, it.Prev, true)
	return it, err
}

// Time runs iters lock-step iterations of fixed inputs and returns the
// mean time of each phase over them, in µs (host clock around the
// launches of every rank and their completion).
func (w *World) Time(tb testing.TB, iters int) [4]float64 {
	tb.Helper()
	rng := rand.New(rand.NewPCG(9, 9))
	it, err := workload.NewIteration(rng, w.Cfg, &w.L)
	if err != nil {
		tb.Fatal(err)
	}
	steps := make([][4]cuda.Launch, len(w.Backends))
	for r := range w.Backends {
		steps[r] = w.load(tb, r, it, false)
	}
	var sum [4]time.Duration
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(iters+1)*time.Minute)
	defer cancel()
	for i := 0; i < iters; i++ {
		for p := cuda.PhaseDispatchSend; p <= cuda.PhaseCombineRecv; p++ {
			t0 := time.Now()
			for r, b := range w.Backends {
				if err := steps[r][p].Run(b.Stream()); err != nil {
					tb.Fatal(err)
				}
			}
			for _, b := range w.Backends {
				if err := b.Stream().Sync(ctx); err != nil {
					tb.Fatal(err)
				}
			}
			sum[p] += time.Since(t0)
		}
	}
	var us [4]float64
	for p := range sum {
		us[p] = float64(sum[p].Microseconds()) / float64(max(iters, 1))
	}
	return us
}
