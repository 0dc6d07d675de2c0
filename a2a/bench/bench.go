package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/a2a/internal/workload"
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
	// Backend is "host" (the default). "cuda" is not implemented yet.
	Backend string
	// Transport is the fabric transport ("auto", "efa", "verbs",
	// "tcp;ofi_rxm", "shm", or "mem" for ranks in one process).
	Transport string
	// Node pins libfabric to an address; "127.0.0.1" for loopback runs.
	Node   string
	Iters  int
	Warmup int
	// Check runs CheckIters iterations against the oracle first.
	Check      bool
	CheckIters int
	Seed       uint64
	// Timeout bounds each phase of each iteration (default 30 s).
	Timeout time.Duration
}

// Options are the parts a caller may provide instead of Run building
// them; zero values make Run build its own.
type Options struct {
	Engine *fabric.Engine  // nil: open one for Spec.Transport
	Node   host.NodeMemory // nil: a host.ProcessNode
	Logger *slog.Logger    // nil: discard the engine's logs
}

// Stats summarises samples in microseconds.
type Stats struct {
	Mean float64 `json:"mean"`
	Std  float64 `json:"std"`
	Min  float64 `json:"min"`
	P01  float64 `json:"p01"`
	P25  float64 `json:"p25"`
	P50  float64 `json:"p50"`
	P75  float64 `json:"p75"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Phase is one of dispatch and combine: both halves back to back, each
// half alone, and the bandwidth of the nominal bytes at the median.
type Phase struct {
	Both          Stats   `json:"both"`
	Send          Stats   `json:"send"`
	Recv          Stats   `json:"recv"`
	NominalBytes  int64   `json:"nominal_bytes"`
	BandwidthGBps float64 `json:"bandwidth_gbps"`
}

// Report is the result. Every rank gets the statistics of all ranks'
// samples together.
type Report struct {
	WorldSize int    `json:"world_size"`
	NVLink    int    `json:"nvlink"`
	Replicas  int    `json:"dp"`
	NICs      int    `json:"nets_per_gpu"`
	Tokens    int    `json:"tokens"`
	Hidden    int    `json:"hidden"`
	Scales    int    `json:"scales"`
	Experts   int    `json:"experts"`
	TopK      int    `json:"topk"`
	In        string `json:"in_dtype"`
	Out       string `json:"out_dtype"`
	Backend   string `json:"backend"`
	Provider  string `json:"provider"`
	Iters     int    `json:"iters"`
	Warmup    int    `json:"warmup"`
	Checked   bool   `json:"checked"`
	Samples   int    `json:"samples"`
	Dispatch  Phase  `json:"dispatch"`
	Combine   Phase  `json:"combine"`
}

// Errors Run returns besides those of the pieces it drives.
var (
	ErrCheck = errors.New("bench: results differ from the oracle")
)

// router draws top-K routings without allocating: K distinct experts per
// token, uniformly, by a partial Fisher-Yates shuffle of a reused
// permutation.
type router struct {
	perm []uint32
	k    int
}

func newRouter(experts, k int) *router {
	r := &router{perm: make([]uint32, experts), k: k}
	for i := range r.perm {
		r.perm[i] = uint32(i)
	}
	return r
}

// draw fills idx (tokens*K entries) with a fresh routing.
func (r *router) draw(rng *rand.Rand, idx []uint32) {
	p, n := r.perm, len(r.perm)
	for t := 0; t+r.k <= len(idx); t += r.k {
		for k := 0; k < r.k; k++ {
			j := k + rng.IntN(n-k)
			p[k], p[j] = p[j], p[k]
			idx[t+k] = p[k]
		}
	}
}

// sample is one iteration on one rank, in microseconds.
type sample struct{ ds, dr, cs, cr float32 }

// Validate checks what Run would refuse before it touches anything, so a
// launcher can reject a bad command line once instead of once per rank.
// A backend other than "host" wraps fabric.ErrNotSupported (the CUDA
// backend is not built yet), bad counts wrap a2a.ErrInvalidArgument and a
// bad shape is the Config's *a2a.ConfigError.
func (s Spec) Validate() error {
	switch s.Backend {
	case "", "host":
	case "cuda":
		return fmt.Errorf("bench: backend \"cuda\": the CUDA backend of a2a is not built yet (use the host backend): %w",
			fabric.ErrNotSupported)
	default:
		return fmt.Errorf("bench: backend %q: want host or cuda: %w", s.Backend, fabric.ErrNotSupported)
	}
	if s.Iters < 1 || s.Warmup < 0 || s.CheckIters < 0 {
		return fmt.Errorf("bench: %d iterations, %d warmup, %d check iterations: %w",
			s.Iters, s.Warmup, s.CheckIters, a2a.ErrInvalidArgument)
	}
	cfg := s.Config
	cfg.Rank = 0
	return cfg.Validate()
}

// Run runs spec on this rank of g and returns the report.
func Run(ctx context.Context, spec Spec, g Group, opt Options) (_ *Report, err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Backend == "" {
		spec.Backend = "host"
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
		eng, err = fabric.Open(ctx, fabric.Config{Transport: spec.Transport, NICs: l.NICsPerGPU, Node: spec.Node, Logger: logger})
		if err != nil {
			return nil, err
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = errors.Join(err, eng.Close(cctx))
		}()
	}
	node := opt.Node
	if node == nil {
		if node, err = host.NewProcessNode(cfg, g); err != nil {
			return nil, err
		}
	}
	b, err := host.New(ctx, cfg, host.Options{Engine: eng, Exchange: g, Node: node})
	if err != nil {
		return nil, err
	}
	c, err := a2a.New(cfg, b)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, c.Close()) }()

	rep := &Report{WorldSize: l.WorldSize, NVLink: l.NVLinkSize, Replicas: l.ReplicaSize, NICs: l.NICsPerGPU,
		Tokens: l.MaxTokens, Hidden: l.Hidden, Scales: l.Scales, Experts: l.Experts, TopK: l.ExpertsPerToken,
		In: l.DispatchType.String(), Out: l.CombineType.String(),
		Backend: spec.Backend, Provider: eng.Info().Transport, Iters: spec.Iters, Warmup: spec.Warmup}
	if spec.Check {
		n := max(spec.CheckIters, 1)
		cctx, cancel := context.WithTimeout(ctx, time.Duration(n)*spec.Timeout)
		err := workload.RunRank(cctx, cfg, c, cfg.Rank, spec.Seed+1, n)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%w: rank %d: %w", ErrCheck, cfg.Rank, err)
		}
		rep.Checked = true
	}

	mine, err := measure(ctx, spec, &l, c, g)
	if err != nil {
		return nil, err
	}
	all, err := g.AllGather(ctx, encodeSamples(mine))
	if err != nil {
		return nil, err
	}
	var samples []sample
	for _, m := range all {
		samples = append(samples, decodeSamples(m)...)
	}
	rep.Samples = len(samples)
	T, K := int64(l.MaxTokens), int64(l.ExpertsPerToken)
	rep.Dispatch = phase(samples, func(s sample) (float32, float32) { return s.ds, s.dr }, T*K*int64(l.TokenBytes+l.ScaleBytes))
	rep.Combine = phase(samples, func(s sample) (float32, float32) { return s.cs, s.cr }, T*K*int64(l.CombineBytes))
	return rep, nil
}

// measure runs the timed iterations of this rank.
func measure(ctx context.Context, spec Spec, l *a2a.Layout, c *a2a.Context, g Group) ([]sample, error) {
	T, K := l.MaxTokens, l.ExpertsPerToken
	rng := rand.New(rand.NewPCG(spec.Seed, uint64(l.Rank)+1))
	routing := newRouter(l.Experts, K)
	indices := make([]uint32, T*K)
	x := make([]byte, T*l.TokenBytes)
	for i := range x {
		x[i] = byte(rng.Uint32())
	}
	weights := make([]float32, T*K)
	for i := range weights {
		weights[i] = 1 / float32(K)
	}
	in := a2a.DispatchInput{Tokens: T, X: x, Scales: make([]float32, T*l.Scales)}
	dout := a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), X: make([]byte, l.OutputRows*l.TokenBytes),
		Scales: make([]float32, l.OutputRows*l.Scales)}
	cin := a2a.CombineInput{Y: make([]byte, l.OutputRows*l.CombineBytes)}
	cout := a2a.CombineOutput{Out: make([]byte, T*l.CombineBytes), Weights: weights}

	var out []sample
	for it := 0; it < spec.Warmup+spec.Iters; it++ {
		// A new routing every iteration, as a serving engine sees, drawn
		// before the barrier so it is not timed.
		routing.draw(rng, indices)
		in.Indices = indices
		var s sample
		err := func() error {
			pctx, cancel := context.WithTimeout(ctx, spec.Timeout)
			defer cancel()
			if err := g.Barrier(pctx); err != nil {
				return err
			}
			t0 := time.Now()
			if err := c.DispatchSend(pctx, &in); err != nil {
				return err
			}
			t1 := time.Now()
			if err := c.DispatchRecv(pctx, &dout); err != nil {
				return err
			}
			t2 := time.Now()
			if err := g.Barrier(pctx); err != nil {
				return err
			}
			t3 := time.Now()
			if err := c.CombineSend(pctx, &cin); err != nil {
				return err
			}
			t4 := time.Now()
			if err := c.CombineRecv(pctx, &cout); err != nil {
				return err
			}
			t5 := time.Now()
			us := func(a, b time.Time) float32 { return float32(b.Sub(a).Nanoseconds()) / 1e3 }
			s = sample{ds: us(t0, t1), dr: us(t1, t2), cs: us(t3, t4), cr: us(t4, t5)}
			return nil
		}()
		if err != nil {
			return nil, fmt.Errorf("bench: iteration %d: %w", it, err)
		}
		if it >= spec.Warmup {
			out = append(out, s)
		}
	}
	return out, nil
}

func encodeSamples(s []sample) []byte {
	b := make([]byte, 0, 16*len(s))
	for _, v := range s {
		for _, f := range []float32{v.ds, v.dr, v.cs, v.cr} {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	return b
}

func decodeSamples(b []byte) []sample {
	out := make([]sample, 0, len(b)/16)
	f := func(i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }
	for i := 0; i+16 <= len(b); i += 16 {
		out = append(out, sample{f(i / 4), f(i/4 + 1), f(i/4 + 2), f(i/4 + 3)})
	}
	return out
}
