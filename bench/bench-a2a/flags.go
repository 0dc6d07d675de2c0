package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/bench/internal/a2abench"
	"github.com/ferryrdma/ferry/bench/internal/cliflag"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// errUsage marks a bad command line (exit status 2).
var errUsage = errors.New("usage")

// options is the parsed command line.
type options struct {
	fs    *flag.FlagSet
	rdv   rendezvous.Config
	spawn bool
	spec  a2abench.Spec
	json  string
	// verbose sends the engine's logs to standard error.
	verbose bool
	// poll is --poll: auto, spin or adaptive (Spec.Spin).
	poll string
	// doorbells is --doorbells (Spec.Doorbells).
	doorbells string
	// mpiOrder is --mpi-order: how the Open MPI peer orders its calls.
	mpiOrder string
	// listTransports prints the transport table and exits (--list-transports
	// or the transports subcommand).
	listTransports bool
	// model prints the critical-path model of a step and exits.
	model bool
	// metrics is the --metrics address (each rank adds its local rank to
	// the port).
	metrics string
	// cpuProfile is the --cpuprofile prefix (each rank adds .rankR).
	cpuProfile string
	// dir: ranks meet through a directory (directory.go).
	dir dirFlags
}

// jobFlags are the rendezvous flags a spawned child must not inherit:
// SpawnLocal gives each child its rank and the store's address.
var jobFlags = map[string]bool{"spawn": true, "rank": true, "local-rank": true, "master": true}

// parseFlags reads args over the launcher's environment (lookup).
func parseFlags(args []string, lookup func(string) (string, bool), stderr io.Writer) (*options, error) {
	o := &options{fs: flag.NewFlagSet("bench-a2a", flag.ContinueOnError)}
	fs := o.fs
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: bench-a2a --world-size W --spawn [flags]\n"+
			"       bench-a2a --world-size W --rank R --master HOST:PORT [flags]  (FERRY_JOB_TOKEN set on every rank)\n"+
			"       <launcher> bench-a2a [flags]  (torchrun, mpirun or srun environment)\n"+
			"       bench-a2a transports  (every transport name and its provider; or --list-transports)\n\n"+
			"fabric-debug spells the shared options the same way; the earlier spellings stay as aliases:\n"+
			"--provider, --nets-per-gpu, --spin, --verbose, --list-transports.\n\n"+
			"Across hosts: every rank gets --master HOST:PORT (or FERRY_MASTER) naming rank 0's rendezvous;\n"+
			"a master that is not a loopback address needs FERRY_ALLOW_REMOTE=1 on every rank, and every\n"+
			"rank the same FERRY_JOB_TOKEN. Use --transport efa, verbs or 'tcp;ofi_rxm' (with --node, the\n"+
			"address the other hosts reach); shm and ipc connect the ranks of one host only.\n\nflags:\n")
		fs.PrintDefaults()
	}
	var err error
	if o.rdv, err = rendezvous.ConfigFromEnv(lookup); err != nil {
		return nil, fmt.Errorf("%w: launcher environment: %w", errUsage, err)
	}
	o.rdv.BindFlags(fs)
	fs.BoolVar(&o.spawn, "spawn", false, "start --world-size local ranks of this program and wait for them")
	o.dir.bind(fs)

	cfg := &o.spec.Config
	fs.IntVar(&cfg.NVLinkSize, "nvlink", 1, "ranks per shared-memory (NVLink) domain; 1: every pair crosses the fabric")
	fs.IntVar(&cfg.ReplicaSize, "dp", 1, "replicas per token group (attention data-parallel size)")
	fs.IntVar(&cfg.NICsPerGPU, "nics", 1, "NICs per rank")
	cliflag.Alias(fs, "nets-per-gpu", "nics")
	tokens := fs.String("tokens", "128", "tokens per rank and iteration (128 decode, 4096 prefill); a comma list runs a case per count, buffers sized for the largest")
	fs.IntVar(&cfg.Hidden, "hidden", 7168, "elements per token")
	fs.IntVar(&cfg.Scales, "scales", 56, "float32 scales per token (0: none)")
	fs.IntVar(&cfg.Experts, "experts", 256, "experts in the world")
	fs.IntVar(&cfg.ExpertsPerToken, "topk", 8, "experts per token")
	fs.IntVar(&cfg.ExpertPadding, "pad", 1, "align each local expert's output segment to this many rows")
	fs.IntVar(&cfg.PrivateTokens, "private", 0, "copies per private window (0: default size, -1: none)")
	in := fs.String("in-dtype", "fp8", "dispatch element type: fp8, bf16, fp16, fp32")
	out := fs.String("out-dtype", "bf16", "combine element type: bf16, fp16, fp32")

	s := &o.spec
	fs.StringVar(&s.Backend, "backend", "host", "a2a backend: host, cuda (this rank's GPU) or cuda-emu (the CUDA kernels on the CPU emulator)")
	fs.IntVar(&s.Grid, "grid", 0, "blocks per launch of the CUDA backends (0: one per SM on a GPU, a few on the emulator)")
	fs.StringVar(&o.poll, "poll", "auto", "how the CUDA backends' worker waits for the kernels' flags: spin (never sleeps, a core per rank; forces it on the emulator), "+
		"adaptive (backs off to sleeps; not on a GPU, whose worker always spins here) or auto (spin on a GPU, adaptive on the emulator); the engine itself polls adaptively with --backend host and cuda-emu")
	cliflag.Spin(fs, &o.poll, "auto")
	fs.StringVar(&o.doorbells, "doorbells", "auto", "host backend over a transport that lends mappings (ipc): auto (doorbells in the peers' memory and shared token rows, unless the ranks outnumber the CPUs), on, or off (every signal and row through the engine, for comparisons)")
	fs.IntVar(&s.ReduceThreads, "reduce-threads", 1, "host backend: goroutines per rank that combine's weighted sum splits its tokens over (more where cores are spare)")
	fs.IntVar(&s.Block, "block", 0, "threads per block of the CUDA backends, a multiple of 32 (0: 512 on a GPU, 64 on the emulator)")
	fs.StringVar(&s.Transport, "transport", "", `fabric transport: shm, ipc, "tcp;ofi_rxm", efa, verbs, auto (default: shm with --spawn, else auto)`)
	cliflag.Alias(fs, "provider", "transport")
	fs.StringVar(&s.Node, "node", "", "libfabric node address to pin (default 127.0.0.1 with --spawn)")
	fs.StringVar(&s.Mode, "mode", "", "run every rank in this process on one device (no --spawn): lockstep (each phase of every rank, then the next) or concurrent (a stream per rank, grids of SMs/W blocks, a watchdog of --timeout per wait)")
	fs.BoolVar(&s.Graph, "graph", false, "one device, GPU only: also time replays of the lock step captured once into a CUDA graph (implies --mode lockstep)")
	fs.IntVar(&s.Iters, "iters", 200, "timed iterations")
	fs.IntVar(&s.Warmup, "warmup", 20, "untimed iterations before them")
	fs.BoolVar(&s.Check, "check", true, "after each case's timed iterations, compare --check-iters iterations of it with the oracle on every rank")
	fs.IntVar(&s.CheckIters, "check-iters", 1, "iterations --check compares per case")
	fs.BoolVar(&s.Floor, "peers", true, "after each case, time a memcpy of each phase's nominal bytes on every rank at once (floor_us) and, with --backend host, Open MPI's MPI_Alltoallv of the case's per-pair bytes on as many local processes (mpi_us; needs mpirun and mpicc)")
	fs.StringVar(&o.mpiOrder, "mpi-order", "step", "the Open MPI peer's calls: step (a dispatch then a combine per iteration, each on its own buffers, as a step of the all-to-all runs) or phase (every dispatch call back to back, then every combine call: each phase's buffers stay in cache between its calls)")
	fs.Uint64Var(&s.Seed, "seed", 1, "seed of the inputs and routings")
	fs.DurationVar(&s.Timeout, "timeout", 30*time.Second, "bound on each phase of each iteration")
	fs.StringVar(&o.json, "json", "", `write one JSON record per line to this file as the run goes ("-": standard output; the table then goes to standard error)`)
	fs.BoolVar(&o.verbose, "v", false, "log the engine's lifecycle to standard error too, not only its warnings and errors")
	cliflag.Alias(fs, "verbose", "v")
	fs.StringVar(&o.metrics, "metrics", "", "serve each rank's engine counters for Prometheus at http://ADDR/metrics, the port plus the local rank")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write each rank's CPU profile (runtime/pprof) to this path plus .rankR")
	fs.BoolVar(&o.listTransports, "list-transports", false, "alias of the transports subcommand: print every transport name and its provider, then exit")
	fs.BoolVar(&o.model, "model", false, "print a critical-path MODEL of one step of this shape (published link figures, stated assumptions; no run), then exit")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if o.listTransports {
		return o, nil
	}
	if err := o.setPoll(); err != nil {
		return nil, err
	}
	switch o.doorbells {
	case "auto":
		s.Doorbells = host.DoorbellsAuto
	case "on":
		s.Doorbells = host.DoorbellsOn
	case "off":
		s.Doorbells = host.DoorbellsOff
	default:
		return nil, fmt.Errorf("%w: --doorbells %q: want auto, on or off", errUsage, o.doorbells)
	}
	if o.mpiOrder != "step" && o.mpiOrder != "phase" {
		return nil, fmt.Errorf("%w: --mpi-order %q: want step or phase", errUsage, o.mpiOrder)
	}
	if s.Tokens, err = parseTokens(*tokens); err != nil {
		return nil, fmt.Errorf("%w: --tokens: %w", errUsage, err)
	}
	cfg.MaxTokens = slices.Max(s.Tokens)
	var ok bool
	if cfg.DispatchType, ok = a2a.ParseDType(*in); !ok {
		return nil, fmt.Errorf("%w: --in-dtype %q: want fp8, bf16, fp16 or fp32", errUsage, *in)
	}
	if cfg.CombineType, ok = a2a.ParseDType(*out); !ok || !cfg.CombineType.CombineCapable() {
		return nil, fmt.Errorf("%w: --out-dtype %q: want bf16, fp16 or fp32", errUsage, *out)
	}
	cfg.WorldSize = o.rdv.WorldSize
	if err := o.dir.check(fs, o.spawn || s.Mode != "" || s.Graph, cfg.WorldSize); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if s.Graph && s.Mode == "" {
		s.Mode = "lockstep"
	}
	if s.Mode != "" {
		// Every rank in this process: no job to join or spawn.
		if o.spawn {
			return nil, fmt.Errorf("%w: --mode runs every rank in this process on one device: drop --spawn", errUsage)
		}
		if s.Transport == "" {
			s.Transport = "mem"
		}
	} else if o.spawn {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if set["rank"] || set["local-rank"] || set["master"] {
			return nil, fmt.Errorf("%w: --spawn gives every rank its place: drop --rank, --local-rank and --master", errUsage)
		}
		if s.Transport == "" {
			s.Transport = "shm"
		}
		if s.Node == "" {
			s.Node = "127.0.0.1"
		}
	} else {
		if r := o.rdv.Rank; r < 0 || r >= cfg.WorldSize {
			return nil, fmt.Errorf("%w: rank %d outside a world of %d", errUsage, r, cfg.WorldSize)
		}
		if s.Transport == "" {
			s.Transport = "auto"
		}
	}
	if s.Transport == "mem" && cfg.WorldSize > 1 && s.Mode == "" {
		// The in-process provider cannot reach another process.
		return nil, fmt.Errorf("%w: --transport mem connects ranks of one process only; use shm, ipc or \"tcp;ofi_rxm\"", errUsage)
	}
	if err := s.Validate(); err != nil {
		if errors.Is(err, fabric.ErrNotSupported) {
			return nil, err // a valid request this build cannot serve
		}
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	return o, nil
}

// childArgs is the command line of a spawned rank: every flag as parsed
// (defaults resolved), except the ones that place a rank in the job.
func (o *options) childArgs() []string {
	var args []string
	o.fs.VisitAll(func(f *flag.Flag) {
		if jobFlags[f.Name] || cliflag.IsAlias(f) {
			return
		}
		v := f.Value.String()
		switch f.Name {
		case "transport":
			v = o.spec.Transport
		case "node":
			v = o.spec.Node
		}
		args = append(args, "--"+f.Name+"="+v)
	})
	return args
}

// setPoll turns --poll into Spec.Spin. A value the chosen backend cannot
// honour is refused rather than ignored: the host backend has no worker of
// its own to spin, and a GPU's worker always spins in this tool.
func (o *options) setPoll() error {
	backend := o.spec.Backend
	switch o.poll {
	case "auto":
		o.spec.Spin = false
	case "spin":
		if backend == a2abench.BackendHost || backend == "" {
			return fmt.Errorf("%w: --poll spin sets the CUDA backends' worker; --backend host has none (its engine polls adaptively)", errUsage)
		}
		o.spec.Spin = true
	case "adaptive":
		if backend == a2abench.BackendCUDA {
			return fmt.Errorf("%w: --poll adaptive: the cuda backend's worker spins on a GPU here (--poll auto or spin)", errUsage)
		}
		o.spec.Spin = false
	default:
		return fmt.Errorf("%w: --poll %q: want spin, adaptive or auto", errUsage, o.poll)
	}
	return nil
}

// parseTokens parses a comma list of token counts.
func parseTokens(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a token count", f)
		}
		out = append(out, n)
	}
	if slices.Max(out) == 0 {
		return nil, fmt.Errorf("%q: the largest case needs at least one token", v)
	}
	return out, nil
}

// lookupEnv is os.LookupEnv, named so tests can pass their own.
var lookupEnv = os.LookupEnv
