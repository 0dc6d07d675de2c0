package a2abench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/cudabackend/emulated"
	"github.com/ferryrdma/ferry/a2a/cudabackend/onedevice"
	"github.com/ferryrdma/ferry/a2a/workload"
	"github.com/ferryrdma/ferry/fabric"
)

// One-device modes (Spec.Mode): all W ranks in this process on one device,
// the way several ranks share one GPU.
const (
	ModeLockStep   = "lockstep"   // every rank's phase N, then phase N+1, full grids
	ModeConcurrent = "concurrent" // a stream per rank, grids of SMs/W blocks, a watchdog
	// ModeGraph names the rows of Spec.Graph: replays of a captured lock
	// step.
	ModeGraph = "graph"
)

// DeviceCase is one token count of a one-device run: every timed step of
// all W ranks together (host clock around the launches and their
// completion), in one mode.
type DeviceCase struct {
	Tokens int    `json:"tokens"`
	Mode   string `json:"mode"` // ModeLockStep, ModeConcurrent or ModeGraph
	// Steps are the timed steps; Phases, in lock step, each phase of
	// every rank (dispatch send, dispatch recv, combine send, combine
	// recv) within them.
	Steps  []time.Duration    `json:"steps"`
	Phases [4][]time.Duration `json:"phases,omitempty"`
	// Bytes is what a step of every rank reads and writes in device memory
	// at least (onedevice.StepBytes); FloorUs is it over the device's
	// measured copy bandwidth (0 where not measured: the emulator).
	Bytes   int64   `json:"bytes"`
	FloorUs float64 `json:"floor_us,omitempty"`
	// Checked: the last timed step's outputs and Spec.CheckIters steps of
	// new inputs were compared with the oracle; CheckError is the first
	// mismatch.
	Checked    bool   `json:"checked"`
	CheckError string `json:"check_error,omitempty"`
}

// validateDevice checks what a one-device run needs of spec.
func (s Spec) validateDevice() error {
	if s.Mode == "" {
		if s.Graph {
			return fmt.Errorf("bench: graph replays run the ranks on one device: --mode lockstep: %w", a2a.ErrInvalidArgument)
		}
		return nil
	}
	if _, err := onedevice.ParseMode(s.Mode); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if s.Backend != BackendCUDA && s.Backend != BackendCUDAEmu {
		return fmt.Errorf("bench: --mode %s runs the CUDA backend's kernels (--backend cuda or cuda-emu), not %q: %w",
			s.Mode, s.Backend, a2a.ErrInvalidArgument)
	}
	if s.Graph && s.Mode != ModeLockStep {
		return fmt.Errorf("bench: a graph replays one stream, in lock step: --mode lockstep with --graph: %w", a2a.ErrInvalidArgument)
	}
	if s.Graph && s.Backend != BackendCUDA {
		return fmt.Errorf("bench: --graph needs a GPU (--backend cuda): CUDA graphs capture driver streams, and the emulator has none: %w",
			fabric.ErrNotSupported)
	}
	return nil
}

// RunDevice runs spec with all Config.WorldSize ranks in this process on
// one device (spec.Mode set): the GPU of ordinal 0 (--backend cuda) or the
// emulator. Per case it times Warmup+Iters steps of one fixed input (every
// rank sends the case's token count, routed uniformly), in spec.Mode and,
// with spec.Graph, as replays of the lock step captured into one CUDA
// graph; then checks the last step and CheckIters steps (replays) of new
// inputs against the oracle. On a GPU it measures the device's copy
// bandwidth first, for each case's floor.
func RunDevice(ctx context.Context, spec Spec, opt Options) (_ *Report, err error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if spec.Mode == "" {
		return nil, fmt.Errorf("bench: RunDevice without a mode: %w", a2a.ErrInvalidArgument)
	}
	mode, _ := onedevice.ParseMode(spec.Mode)
	if spec.Timeout <= 0 {
		spec.Timeout = 30 * time.Second
	}
	cfg := spec.Config
	cfg.Rank = 0
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	o := onedevice.Options{Transport: spec.Transport, Watchdog: spec.Timeout,
		Backend: cudabackend.Options{Grid: spec.Grid, Block: spec.Block, Spin: spec.Spin}}
	rep := &Report{WorldSize: l.WorldSize, NVLink: l.NVLinkSize, Replicas: l.ReplicaSize, NICs: l.NICsPerGPU,
		MaxTokens: l.MaxTokens, Hidden: l.Hidden, Scales: l.Scales, Experts: l.Experts, TopK: l.ExpertsPerToken,
		In: l.DispatchType.String(), Out: l.CombineType.String(), Backend: spec.Backend, Provider: o.Transport,
		Iters: spec.Iters, Warmup: spec.Warmup, Mode: spec.Mode, Graph: spec.Graph, Buffers: "device memory"}
	if o.Transport == "" {
		rep.Provider = "mem"
	}
	if spec.Check {
		rep.CheckIters = max(spec.CheckIters, 1)
	}
	var bw float64
	switch spec.Backend {
	case BackendCUDAEmu:
		o.Device = emulated.NewDevice()
	case BackendCUDA:
		dev, closeDev, err := openGPU(cfg, nil)
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, closeDev()) }()
		o.Device = dev
		// The in-process fabric copies by host address: transport buffers
		// it carries must be host memory (mapped into the device).
		o.Mapped = l.Nodes > 1
		if o.Mapped {
			rep.Buffers = "host memory mapped into the device (the in-process fabric copies by host address; kernel accesses to them cross PCIe)"
		}
		if bw, err = onedevice.CopyBandwidth(dev.Context()); err != nil {
			return nil, err
		}
		rep.CopyGBps = bw / 1e9
	}
	rep.Device = o.Device.Name()
	grid, block := o.Device.DefaultLaunch()
	if mode == onedevice.Concurrent && o.Backend.Grid == 0 {
		// Every rank's kernels resident together.
		o.Backend.Grid = max(grid/l.WorldSize, 1)
	}
	rep.Grid, rep.Block = or(o.Backend.Grid, grid), or(o.Backend.Block, block)
	w, err := onedevice.New(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, w.Close()) }()
	if opt.OnStart != nil {
		opt.OnStart(rep)
	}
	failed := 0
	for i, T := range spec.cases() {
		cases, err := runDeviceCase(ctx, spec, w, mode, T, spec.Seed+uint64(i)<<32)
		for _, c := range cases {
			c.Bytes = int64(l.WorldSize) * onedevice.StepBytes(&l, T)
			if bw > 0 {
				c.FloorUs = float64(c.Bytes) / bw * 1e6
			}
			if c.CheckError != "" {
				failed++
			}
			rep.DeviceCases = append(rep.DeviceCases, c)
			if opt.OnDeviceCase != nil {
				opt.OnDeviceCase(c)
			}
		}
		if err != nil {
			return rep, fmt.Errorf("bench: case of %d tokens: %w", T, err)
		}
	}
	if failed > 0 {
		return rep, fmt.Errorf("%w: %d of %d cases", ErrCheck, failed, len(rep.DeviceCases))
	}
	return rep, nil
}

func or(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// runDeviceCase times and checks one case: its mode's row, and the graph's
// with spec.Graph. A step that fails ends the run (the world's epochs are
// then out of step); a check that fails is the rows' CheckError.
func runDeviceCase(ctx context.Context, spec Spec, w *onedevice.World, mode onedevice.Mode, T int,
	seed uint64) ([]DeviceCase, error) {
	it, err := workload.BenchIteration(rand.New(rand.NewPCG(seed, 3)), w.Cfg, &w.L, T)
	if err != nil {
		return nil, err
	}
	steps, err := w.Load(it, true)
	if err != nil {
		return nil, err
	}
	if err := w.SetTokens(T); err != nil {
		return nil, err
	}
	c := DeviceCase{Tokens: T, Mode: mode.String()}
	for i := 0; i < spec.Warmup+spec.Iters; i++ {
		phases, step, err := w.Run(ctx, mode, steps)
		if err != nil {
			return nil, fmt.Errorf("%v step %d: %w", mode, i, err)
		}
		if i < spec.Warmup {
			continue
		}
		c.Steps = append(c.Steps, step)
		if mode == onedevice.LockStep {
			for p := range phases {
				c.Phases[p] = append(c.Phases[p], phases[p])
			}
		}
	}
	out := []DeviceCase{c}
	var g *onedevice.Graph
	if spec.Graph {
		g = &onedevice.Graph{}
		defer g.Close()
		if err := g.Record(ctx, w, steps); err != nil {
			return nil, err
		}
		gc := DeviceCase{Tokens: T, Mode: ModeGraph}
		for i := 0; i < spec.Warmup+spec.Iters; i++ {
			t0 := time.Now()
			if err := g.Replay(ctx, w); err != nil {
				return out, fmt.Errorf("graph replay %d: %w", i, err)
			}
			if i >= spec.Warmup {
				gc.Steps = append(gc.Steps, time.Since(t0))
			}
		}
		out = append(out, gc)
	}
	if spec.Check {
		check := w.Check(it)
		if check == nil {
			check = w.Iterate(ctx, mode, seed+1, max(spec.CheckIters, 1))
		}
		if check == nil && g != nil {
			check = w.Replay(ctx, g, onedevice.ReplayOptions{Seed: seed + 2, Replays: max(spec.CheckIters, 1), Recorded: true})
		}
		for i := range out {
			out[i].Checked = true
			if check != nil {
				out[i].CheckError = check.Error()
			}
		}
	}
	return out, nil
}
