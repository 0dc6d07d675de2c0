package a2abench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/fabric"
)

// Group is what Run needs from the job: rendezvous.Group implements it.
type Group interface {
	Rank() int
	WorldSize() int
	AllGather(ctx context.Context, data []byte) ([][]byte, error)
	Barrier(ctx context.Context) error
}

// Spec is one benchmark run, identical on every rank (Config.Rank is taken
// from the group).
type Spec struct {
	Config a2a.Config
	// Backend is BackendHost (the default), BackendCUDA or BackendCUDAEmu.
	Backend string
	// Grid and Block size the CUDA backends' launches (blocks, threads per
	// block); 0 takes the device's default.
	Grid, Block int
	// Spin makes the CUDA backends' workers poll without sleeping.
	Spin bool
	// ReduceThreads splits the host backend's combine reduction over
	// this many goroutines per rank (host.Options.ReduceThreads).
	ReduceThreads int
	// Doorbells is the host backend's host.Options.Doorbells.
	Doorbells host.Doorbells
	// Transport is the fabric transport ("auto", "efa", "verbs",
	// "tcp;ofi_rxm", "shm", "ipc", or "mem" for ranks in one process).
	Transport string
	// Node pins libfabric to an address; "127.0.0.1" for loopback runs.
	Node string
	// Tokens lists the cases: tokens per rank and iteration, each at most
	// Config.MaxTokens. Empty: one case of Config.MaxTokens tokens.
	Tokens []int
	Iters  int
	Warmup int
	// Check compares CheckIters iterations (at least one) of each case
	// with the oracle (package a2a/reference) after its timed iterations,
	// at the case's token count, on every rank.
	Check      bool
	CheckIters int
	// Floor times, after each case's iterations, copies of each phase's
	// nominal bytes on every rank at once (Case.FloorDispatch,
	// FloorCombine): the memory's speed for the bytes the case moves.
	Floor bool
	Seed  uint64
	// Timeout bounds each phase of each iteration (default 30 s); in a
	// one-device run, every wait of every kernel (the watchdog).
	Timeout time.Duration
	// Mode, when set (ModeLockStep or ModeConcurrent), runs every rank in
	// this process on one device (RunDevice) instead of one rank per
	// process (Run). Graph adds replays of the lock step captured into a
	// CUDA graph (a GPU only).
	Mode  string
	Graph bool
}

// Options are the parts a caller may provide instead of Run building
// them; zero values make Run build its own.
type Options struct {
	Engine *fabric.Engine // nil: open one for Spec.Transport
	// Node shares host memory within a domain (host and cuda-emu
	// backends, ranks in one process); nil: the ranks are processes, and
	// share through a host.ProcessNode (host) or an a2a/cudabackend ProcessNode
	// (cuda-emu: memfds; cuda: CUDA VMM exports).
	Node   host.NodeMemory
	Logger *slog.Logger // nil: discard the engine's logs
	// LogLevel is the least level the engine logs (nil: fabric's default,
	// warnings and errors).
	LogLevel slog.Leveler
	// OnEngine, when set, hears of the engine Run opens (bench-a2a
	// --metrics exports its counters).
	OnEngine func(*fabric.Engine)
	// OnStart, when set, sees the description of the run before its first
	// case; OnCase sees each case as soon as every rank has shared its
	// samples and check (on every rank that set it), and the next case
	// starts once every rank is past its OnCase (within 5 minutes).
	OnStart func(*Report)
	OnCase  func(Case)
	// OnDeviceCase sees each row of a one-device run (RunDevice) as soon
	// as it is measured and checked.
	OnDeviceCase func(DeviceCase)
}

// onCaseTimeout bounds the wait of every rank for the others' OnCase.
const onCaseTimeout = 5 * time.Minute

// Errors Run returns besides those of the pieces it drives.
var (
	ErrCheck = errors.New("bench: results differ from the oracle")
)

// cases returns the token counts of the run.
func (s Spec) cases() []int {
	if len(s.Tokens) == 0 {
		return []int{s.Config.MaxTokens}
	}
	return s.Tokens
}

// Validate checks what Run would refuse before it touches anything, so a
// launcher can reject a bad command line once instead of once per rank.
// An unknown backend wraps fabric.ErrNotSupported, bad counts wrap
// a2a.ErrInvalidArgument and a bad shape is the Config's *a2a.ConfigError.
func (s Spec) Validate() error {
	switch s.Backend {
	case "", BackendHost, BackendCUDA, BackendCUDAEmu:
	default:
		return fmt.Errorf("bench: backend %q: want host, cuda or cuda-emu: %w", s.Backend, fabric.ErrNotSupported)
	}
	if s.Grid < 0 || s.Block < 0 || s.Block%32 != 0 {
		return fmt.Errorf("bench: launch of %d blocks of %d threads: %w", s.Grid, s.Block, a2a.ErrInvalidArgument)
	}
	if s.Iters < 1 || s.Warmup < 0 || s.CheckIters < 0 {
		return fmt.Errorf("bench: %d iterations, %d warmup, %d check iterations: %w",
			s.Iters, s.Warmup, s.CheckIters, a2a.ErrInvalidArgument)
	}
	for _, t := range s.Tokens {
		if t < 0 || t > s.Config.MaxTokens {
			return fmt.Errorf("bench: a case of %d tokens is outside [0, %d]: %w", t, s.Config.MaxTokens, a2a.ErrInvalidArgument)
		}
	}
	if err := s.validateDevice(); err != nil {
		return err
	}
	cfg := s.Config
	cfg.Rank = 0
	return cfg.Validate()
}

// Run runs spec on this rank of g and returns the report. Every case is
// timed, then checked when spec.Check is set; a case whose check failed is
// reported (Case.CheckError) and the run goes on, returning ErrCheck at
// the end. Other errors end the run; the report so far comes with them.
func Run(ctx context.Context, spec Spec, g Group, opt Options) (_ *Report, err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Mode != "" {
		return nil, fmt.Errorf("bench: --mode %s runs every rank in one process (RunDevice): %w", spec.Mode, a2a.ErrInvalidArgument)
	}
	if spec.Backend == "" {
		spec.Backend = BackendHost
	}
	if spec.Timeout <= 0 {
		spec.Timeout = 30 * time.Second
	}
	cfg := spec.Config
	cfg.Rank = g.Rank()
	if cfg.WorldSize != g.WorldSize() {
		return nil, fmt.Errorf("bench: config for %d ranks in a job of %d: %w", cfg.WorldSize, g.WorldSize(), a2a.ErrInvalidConfig)
	}
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	eng := opt.Engine
	if eng == nil {
		logger := opt.Logger
		if logger == nil {
			logger = slog.New(slog.DiscardHandler)
		}
		// On a GPU the engine spins too (latency first, as the CUDA
		// backend's worker does there): its adaptive sleeps of up to a
		// millisecond would dwarf a decode step.
		poll := fabric.PollAdaptive
		if spec.Backend == BackendCUDA {
			poll = fabric.PollSpin
		}
		eng, err = fabric.Open(ctx, fabric.Config{Transport: spec.Transport, NICs: l.NICsPerGPU, Node: spec.Node,
			Logger: logger, LogLevel: opt.LogLevel, Poll: poll})
		if err != nil {
			return nil, err
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = errors.Join(err, eng.Close(cctx))
		}()
		if opt.OnEngine != nil {
			opt.OnEngine(eng)
		}
	}
	b, closeDev, err := newBackend(ctx, spec, cfg, &l, eng, g, opt)
	if err != nil {
		return nil, err
	}
	c, err := a2a.New(cfg, b)
	if err != nil {
		return nil, errors.Join(err, closeDev())
	}
	defer func() { err = errors.Join(err, c.Close(), closeDev()) }()

	in := eng.Info()
	rep := &Report{WorldSize: l.WorldSize, NVLink: l.NVLinkSize, Replicas: l.ReplicaSize, NICs: l.NICsPerGPU,
		MaxTokens: l.MaxTokens, Hidden: l.Hidden, Scales: l.Scales, Experts: l.Experts, TopK: l.ExpertsPerToken,
		In: l.DispatchType.String(), Out: l.CombineType.String(), Backend: spec.Backend,
		Provider: in.Transport, Reason: in.Reason, Iters: spec.Iters, Warmup: spec.Warmup}
	if spec.Check {
		rep.CheckIters = max(spec.CheckIters, 1)
	}
	if opt.OnStart != nil {
		opt.OnStart(rep)
	}
	failed := 0
	for i, tokens := range spec.cases() {
		tc, _ := b.(a2a.TrafficCounter)
		cs, err := runCase(ctx, spec, cfg, &l, c, tc, g, tokens, rep.CheckIters, uint64(i))
		if err != nil {
			return rep, fmt.Errorf("bench: case of %d tokens: %w", tokens, err)
		}
		if cs.CheckError != "" {
			failed++
		}
		rep.Cases = append(rep.Cases, cs)
		if opt.OnCase != nil {
			opt.OnCase(cs)
		}
		// A slow OnCase on one rank (bench-a2a's rank 0 times Open MPI
		// there) must not run out the others' next barrier, which is
		// bounded by spec.Timeout: every rank (with an OnCase or not)
		// waits here until all are done with the case.
		bctx, cancel := context.WithTimeout(ctx, onCaseTimeout)
		err = g.Barrier(bctx)
		cancel()
		if err != nil {
			return rep, fmt.Errorf("bench: after the case of %d tokens: %w", tokens, err)
		}
	}
	if failed > 0 {
		return rep, fmt.Errorf("%w: %d of %d cases", ErrCheck, failed, len(rep.Cases))
	}
	return rep, nil
}
