package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ferryrdma/ferry/bench/internal/cliflag"
	"github.com/ferryrdma/ferry/bench/internal/fabricbench"
	"github.com/ferryrdma/ferry/bench/internal/metricsserver"
	"github.com/ferryrdma/ferry/efa"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // a case failed, a check failed, or anything errored
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// options are the flags every subcommand shares.
type options struct {
	spec      fabricbench.Spec
	out       fabricbench.Output
	provider  string
	gpus      string
	placement string
	hostMem   bool
	workloads string
	sizes     string
	pages     string
	poll      string
	bufferMiB uint64
	raw       bool
	verbose   bool
	// listTransports is --list-transports, the transports subcommand's
	// flag spelling (bench-a2a's).
	listTransports bool
	metrics        string // --metrics ADDR
	spawn          bool
	rdv            rendezvous.Config
	dir            directoryFlags // serve and client: --directory
	args           []string       // the subcommand's arguments, for --spawn
}

func (o *options) flags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("fabric-debug "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.provider, "transport", o.provider, `transport: auto, efa, verbs, shm, ipc, "tcp;ofi_rxm", mem or null`)
	cliflag.Alias(fs, "provider", "transport")
	fs.StringVar(&o.spec.Node, "node", "", "address the provider binds to (default 127.0.0.1 for tcp)")
	fs.IntVar(&o.spec.NICs, "nics", 1, "NICs (domains) per group")
	cliflag.Alias(fs, "nets-per-gpu", "nics")
	fs.IntVar(&o.spec.TargetNICs, "target-nics", 0, "loopback: NICs of the receiving engine (default --nics); the groups may differ")
	fs.BoolVar(&o.hostMem, "host-memory", true, "register host memory; false: GPU memory (of GPU 0 unless --gpus says)")
	fs.StringVar(&o.gpus, "gpus", "", "GPU ordinals, comma list: a group per GPU, buffers in the first one's memory (needs the CUDA driver)")
	fs.StringVar(&o.placement, "gpu-placement", fabricbench.PlaceTopology, "NICs of the GPU groups: topology (nearest) or first (the transport's first --nics)")
	fs.StringVar(&o.workloads, "workloads", "paged,single,imm", "workloads to run: paged, single, imm, read (loopback, client), all (paged, single, imm)")
	fs.StringVar(&o.sizes, "sizes", "", "message or page sizes, comma list with K/M/G suffixes (replaces the default set)")
	fs.StringVar(&o.pages, "pages", "", "page counts of the paged workload, comma list (replaces 10000,100)")
	fs.IntVar(&o.spec.Iters, "iters", 0, "timed iterations per case (0: 100, fewer for large cases)")
	fs.IntVar(&o.spec.Warmup, "warmup", 0, "untimed iterations per case (0: half the iterations, at most 50)")
	fs.StringVar(&o.poll, "poll", "adaptive", "worker polling: spin or adaptive")
	cliflag.Spin(fs, &o.poll, "adaptive")
	fs.StringVar(&o.out.JSON, "json", "", "write one JSON record per line to FILE as the run goes (- for stdout; the table then goes to stderr)")
	fs.StringVar(&o.out.Plot, "plot", "", "draw bandwidth against message size into FILE.png")
	fs.BoolVar(&o.spec.Verify, "verify", true, "check every case's bytes and immediates after its timed iterations")
	fs.Uint64Var(&o.bufferMiB, "buffer-mib", fabricbench.DefaultBuffer>>20, "registered buffer per side, MiB")
	fs.DurationVar(&o.spec.Timeout, "timeout", 120*time.Second, "bound on each case")
	fs.Uint64Var(&o.spec.Seed, "seed", 0x123, "seed of page indices and fill patterns")
	fs.BoolVar(&o.raw, "raw", false, "post the same workloads straight on libfabric from one C loop, bypassing the engine (loopback only)")
	fs.BoolVar(&o.verbose, "v", false, "log the engines' lifecycle too, not only their warnings and errors")
	cliflag.Alias(fs, "verbose", "v")
	fs.BoolVar(&o.listTransports, "list-transports", false, "alias of the transports subcommand: print every transport name and its provider, then exit")
	fs.StringVar(&o.metrics, "metrics", "", "serve the engines' counters for Prometheus at http://ADDR/metrics (ranks: port + local rank)")
	return fs
}

// finish turns the parsed flags into the spec.
func (o *options) finish(stderr io.Writer) error {
	var err error
	s := &o.spec
	s.Provider = o.provider
	if o.gpus != "" {
		if s.GPUs, err = fabricbench.ParseInts(o.gpus); err != nil {
			return fmt.Errorf("--gpus: %w", err)
		}
	}
	if !o.hostMem && len(s.GPUs) == 0 {
		s.GPUs = []int{0}
	}
	s.GPUPlacement = o.placement
	if s.Workloads, err = fabricbench.ParseWorkloads(o.workloads); err != nil {
		return err
	}
	if o.sizes != "" {
		if s.Sizes, err = fabricbench.ParseSizes(o.sizes); err != nil {
			return fmt.Errorf("--sizes: %w", err)
		}
	}
	if o.pages != "" {
		if s.Pages, err = fabricbench.ParseInts(o.pages); err != nil {
			return fmt.Errorf("--pages: %w", err)
		}
	}
	if s.Poll, err = fabric.ParsePollMode(o.poll); err != nil {
		return err
	}
	s.Buffer = o.bufferMiB << 20
	// The engines' warnings and errors go to stderr, beside the table;
	// -v adds their lifecycle (open, close, workers).
	s.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if o.verbose {
		s.LogLevel = slog.LevelDebug
	}
	return nil
}

// parse parses flags that may come before, between or after positional
// arguments, and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// commands are the subcommands, in the order usage lists them.
var commands = []string{"loopback", "serve", "client", "ranks", "info", "transports", "flood-while-register", "help"}

// gpuList matches the GPUS argument of the reference's positional form:
// "host" (or cpu, -) or a comma list of ordinals.
func gpuList(a string) bool {
	if a == "host" || a == "cpu" || a == "-" {
		return true
	}
	for _, f := range strings.Split(a, ",") {
		if _, err := strconv.Atoi(f); err != nil {
			return false
		}
	}
	return true
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		switch {
		case slices.Contains(commands, args[0]):
			cmd, args = args[0], args[1:]
		case !gpuList(args[0]):
			fmt.Fprintf(stderr, "fabric-debug: unknown command %q (want %s; -h for usage)\n",
				args[0], strings.Join(commands, ", "))
			return exitUsage
		}
	}
	switch cmd {
	case "info":
		return info(args, stdout, stderr)
	case "transports":
		return transports(args, stdout, stderr)
	case "flood-while-register":
		return floodWhileRegister(ctx, args, stdout, stderr)
	}
	// Every subcommand takes the same default transport: auto, which picks
	// EFA, then verbs, and refuses (saying what to pass) where neither
	// exists. The header says which transport ran and why.
	o := &options{provider: fabric.TransportAuto, args: args}
	fs := o.flags(cmd, stderr)
	switch cmd {
	case "ranks":
		cfg, err := rendezvous.ConfigFromEnv(os.LookupEnv)
		if err != nil {
			fmt.Fprintln(stderr, "fabric-debug:", err)
			return exitUsage
		}
		o.rdv = cfg
		o.rdv.BindFlags(fs)
		fs.BoolVar(&o.spawn, "spawn", false, "start --world-size local processes and run the ring among them")
	case "serve", "client":
		o.dir.bind(cmd, fs)
	}
	fs.Usage = func() { usage(fs) }
	if cmd == "help" {
		usage(fs)
		return exitOK
	}
	pos, err := parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK // the flag package printed the usage
	}
	if err != nil {
		return exitUsage
	}
	if o.listTransports {
		return transports(pos, stdout, stderr)
	}
	if err := o.finish(stderr); err != nil {
		fmt.Fprintln(stderr, "fabric-debug:", err)
		return exitUsage
	}
	if o.metrics != "" && !o.spawn {
		stop, err := serveMetrics(o, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "fabric-debug:", err)
			return exitUsage
		}
		defer stop()
	}
	switch cmd {
	case "loopback":
		if len(pos) > 0 {
			return badArgs(stderr, cmd, pos)
		}
		return measure(o, stdout, stderr, func(sink fabricbench.Sink) (*fabricbench.Report, error) {
			if o.raw {
				return fabricbench.Raw(ctx, o.spec, sink)
			}
			return fabricbench.Loopback(ctx, o.spec, sink)
		})
	case "serve":
		if len(pos) > 0 {
			return badArgs(stderr, cmd, pos)
		}
		return serve(ctx, o, stdout, stderr)
	case "client":
		if o.dir.url != "" && len(pos) == 0 {
			addr, err := findServer(ctx, &o.dir, stderr)
			if err != nil {
				return exitStatus(stderr, err)
			}
			pos = append(pos, addr.String())
		}
		if len(pos) != 1 {
			fmt.Fprintln(stderr, "fabric-debug client: want exactly one argument, the server's main address (hex), or --directory")
			return exitUsage
		}
		return client(ctx, o, pos[0], stdout, stderr)
	case "ranks":
		return ranks(ctx, o, pos, stdout, stderr)
	}
	// The reference's positional form: [GPUS NICS_PER_GPU [SERVER_ADDRESS]].
	switch len(pos) {
	case 0, 2, 3:
	default:
		fmt.Fprintf(stderr, "fabric-debug: %d positional arguments: want GPUS NICS_PER_GPU [SERVER_ADDRESS] (-h for usage)\n", len(pos))
		return exitUsage
	}
	if len(pos) >= 2 {
		if g := pos[0]; g != "host" && g != "cpu" && g != "-" {
			gpus, err := fabricbench.ParseInts(g)
			if err != nil {
				fmt.Fprintf(stderr, "fabric-debug: GPUS %q: %v (a comma list of ordinals, or host)\n", g, err)
				return exitUsage
			}
			o.spec.GPUs = gpus
		}
		n, err := strconv.Atoi(pos[1])
		if err != nil {
			fmt.Fprintf(stderr, "fabric-debug: NICS_PER_GPU %q is not a number\n", pos[1])
			return exitUsage
		}
		o.spec.NICs = n
	}
	if len(pos) == 3 {
		return client(ctx, o, pos[2], stdout, stderr)
	}
	return serve(ctx, o, stdout, stderr)
}

// serveMetrics starts the --metrics server and has every engine the run
// opens registered with it, labelled by its role.
func serveMetrics(o *options, stderr io.Writer) (stop func(), err error) {
	addr, err := metricsserver.Offset(o.metrics, o.rdv.LocalRank)
	if err != nil {
		return nil, err
	}
	srv, err := metricsserver.Start(addr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "# metrics: %s\n", srv.URL())
	o.spec.OnEngine = func(e *fabric.Engine, role string) {
		if err := srv.AddEngine(e, "engine", role); err != nil {
			fmt.Fprintln(stderr, "fabric-debug: metrics:", err)
		}
	}
	return func() { _ = srv.Close() }, nil
}

// measure runs a mode with a printer as its sink: the header and each row
// print as they come, the summary and the plot at the end.
func measure(o *options, stdout, stderr io.Writer, mode func(fabricbench.Sink) (*fabricbench.Report, error)) int {
	p, err := fabricbench.NewPrinter(o.out, append([]string{"fabric-debug"}, os.Args[1:]...), stdout, stderr)
	if err != nil {
		return exitStatus(stderr, err)
	}
	rep, err := mode(p)
	if err == nil && rep != nil && rep.Failed() {
		err = fabricbench.ErrVerify
	}
	if werr := p.Finish(rep, err); werr != nil && err == nil {
		err = werr
	}
	return exitStatus(stderr, err)
}

func info(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fabric-debug info", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		return badArgs(stderr, "info", fs.Args())
	}
	return exitStatus(stderr, fabricbench.Info(stdout, *asJSON))
}

func serve(ctx context.Context, o *options, stdout, stderr io.Writer) int {
	var pub *publisher
	var pubErr error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.dir.url != "" {
		pub = &publisher{f: &o.dir, log: stdout}
		o.spec.OnEngine = pub.watchEngines(o.spec.OnEngine)
		defer pub.close()
	}
	err := fabricbench.ServeSpec(ctx, o.spec, stdout, func(a fabric.Address, in fabricbench.PeerInfo) {
		if pub != nil {
			// A server that cannot be found is of no use: stop.
			if pubErr = pub.publish(ctx); pubErr != nil {
				cancel()
			}
		}
		fmt.Fprintf(stdout, "# fabric-debug serve: provider=%s transport=%s (%s) nics=%d poll=%s memory=%s link=%s\n",
			in.Provider, in.Transport, in.Reason, in.NICs, in.Poll, memoryName(o.spec), gbps(in.LinkSpeed))
		fmt.Fprintf(stdout, "Main Address: %s\n", a)
		fmt.Fprintf(stdout, "# run: fabric-debug client %s --provider '%s' --nics %d\n", a, o.provider, in.NICs)
		if hp, ok := efa.TCPHostPort(a); ok && in.Transport == efa.HostPortTransport {
			fmt.Fprintf(stdout, "# or:  fabric-debug client %s --provider '%s' --nics %d\n", hp, o.provider, in.NICs)
		}
		if f, ok := stdout.(*os.File); ok {
			_ = f.Sync()
		}
	})
	if pubErr != nil {
		err = fmt.Errorf("--directory: %w", pubErr)
	}
	if err == nil {
		fmt.Fprintln(stdout, "# server stopped")
	}
	return exitStatus(stderr, err)
}

func client(ctx context.Context, o *options, server string, stdout, stderr io.Writer) int {
	addr, err := serverAddress(o.provider, server)
	if err != nil {
		fmt.Fprintf(stderr, "fabric-debug: server address %q: %v\n", server, err)
		return exitUsage
	}
	return measure(o, stdout, stderr, func(sink fabricbench.Sink) (*fabricbench.Report, error) {
		return fabricbench.RunClient(ctx, o.spec, addr, sink)
	})
}

// serverAddress reads client's argument: the server's main address in
// hex, or host:port where the transport's address is a socket address
// (tcp;ofi_rxm).
func serverAddress(transport, s string) (fabric.Address, error) {
	if !strings.Contains(s, ":") {
		return fabric.ParseAddress(s)
	}
	if transport != efa.HostPortTransport {
		return fabric.Address{}, fmt.Errorf("host:port with --transport %q: %s: %w", transport, efa.HostPortLimit, fabric.ErrInvalidArgument)
	}
	return efa.TCPAddress(s)
}

func ranks(ctx context.Context, o *options, pos []string, stdout, stderr io.Writer) int {
	if len(pos) > 0 {
		return badArgs(stderr, "ranks", pos)
	}
	if o.spawn {
		exe, err := os.Executable()
		if err != nil {
			return exitStatus(stderr, err)
		}
		// The children get the same command line without --spawn and
		// without the rank flags: SpawnLocal's environment says who they are.
		argv := []string{exe, "ranks"}
		for _, a := range o.args {
			if a != "--spawn" && a != "-spawn" {
				argv = append(argv, a)
			}
		}
		return exitStatus(stderr, rendezvous.SpawnLocal(ctx, o.rdv.WorldSize, argv, nil))
	}
	if o.rdv.Rank != 0 {
		// Rank 0 prints the ring; the others report only through their
		// exit status and stderr.
		if _, err := fabricbench.Ranks(ctx, o.spec, o.rdv, nil); err != nil {
			fmt.Fprintf(stderr, "fabric-debug rank %d: %v\n", o.rdv.Rank, err)
			return exitFail
		}
		return exitOK
	}
	return measure(o, stdout, stderr, func(sink fabricbench.Sink) (*fabricbench.Report, error) {
		return fabricbench.Ranks(ctx, o.spec, o.rdv, sink)
	})
}

func exitStatus(stderr io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "fabric-debug:", err)
	if errors.Is(err, fabric.ErrInvalidArgument) {
		return exitUsage
	}
	return exitFail
}

func badArgs(stderr io.Writer, cmd string, pos []string) int {
	fmt.Fprintf(stderr, "fabric-debug %s: unexpected arguments %q\n", cmd, pos)
	return exitUsage
}

func gbps(bps uint64) string {
	if bps == 0 {
		return "n/a"
	}
	return strconv.FormatFloat(float64(bps)/1e9, 'f', 0, 64) + "Gbps"
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, `usage:
  fabric-debug loopback [flags]            server and client engines in this process
  fabric-debug serve [flags]               print "Main Address: <hex>" and serve clients until interrupted
  fabric-debug client <hex> [flags]        run the workloads against a server
  fabric-debug client HOST:PORT --transport 'tcp;ofi_rxm' [flags]
                                           the same, the server named by the host:port serve
                                           prints (tcp only: other transports' addresses name
                                           devices, queue pairs or regions; pass their hex)
  fabric-debug serve --directory etcd://HOST:PORT/PREFIX [--name N] [--labels k=v,...]
                                           serve, published in an etcd directory
  fabric-debug client --directory etcd://HOST:PORT/PREFIX [--select k=v,...] [flags]
                                           run against the first server the selector finds there
  fabric-debug ranks --world-size W (--spawn | --rank R --master HOST:PORT) [flags]
                                           a ring of W processes bootstrapped by fabric/rendezvous
  fabric-debug info [--json]               this machine's transports, devices and capabilities
  fabric-debug transports                  every transport name and the provider serving it
                                           (or --list-transports)
  fabric-debug flood-while-register [flags]
                                           a flood's throughput while a large region registers on its group
  fabric-debug [GPUS NICS_PER_GPU [SERVER_ADDRESS]]
                                           the reference's form: serve, or run a client (GPUS: host)

Every command uses --transport auto unless told otherwise: EFA, then verbs,
never a silent fallback. On a machine without RDMA NICs pass --transport shm
(one host) or --transport 'tcp;ofi_rxm'. bench-a2a spells these options
the same way; the earlier spellings stay as aliases: --provider,
--nets-per-gpu, --spin, --verbose, --list-transports.

Across hosts: serve on one host with --transport efa or verbs, or with
'tcp;ofi_rxm' --node <an address the other host reaches> (shm and ipc stay
on one host), and give the client on the other host the address serve
prints. ranks meet through a rendezvous at --master HOST:PORT (or
FERRY_MASTER); a master that is not a loopback address needs
FERRY_ALLOW_REMOTE=1 on every rank (without it a job stays on this host),
and every rank needs the same FERRY_JOB_TOKEN.

flags:
`)
	fs.PrintDefaults()
}

// memoryName says where the registered buffers live.
func memoryName(s fabricbench.Spec) string {
	if len(s.GPUs) > 0 {
		return fmt.Sprintf("cuda:%d", s.GPUs[0])
	}
	return "host"
}
