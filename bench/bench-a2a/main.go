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
	"runtime/pprof"
	"strconv"
	"syscall"

	"github.com/ferryrdma/ferry/bench/internal/a2abench"
	"github.com/ferryrdma/ferry/bench/internal/metricsserver"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
	_ "github.com/ferryrdma/ferry/providers"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "transports" {
		// fabric-debug's subcommand; --list-transports is the flag form.
		if len(args) > 1 {
			fmt.Fprintf(stderr, "bench-a2a transports: takes no arguments, got %q\n", args[1:])
			return 2
		}
		args = []string{"--list-transports"}
	}
	o, err := parseFlags(args, lookupEnv, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "bench-a2a:", err)
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "bench-a2a:", err)
		return 1
	}
	if o.listTransports {
		// The same table as fabric-debug transports and ferry_transports.
		for _, t := range fabric.Transports() {
			fmt.Fprintf(stdout, "%s\t%s\n", t.Name, t.Provider)
		}
		return 0
	}
	if o.model {
		if err := printModel(stdout, o.spec.Config, o.spec.Config.MaxTokens); err != nil {
			fmt.Fprintln(stderr, "bench-a2a:", err)
			return 1
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch {
	case o.spec.Mode != "":
		err = runDevice(ctx, o, stdout, stderr)
	case o.spawn:
		err = spawn(ctx, o, stdout, stderr)
	default:
		err = rank(ctx, o, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench-a2a:", err)
		return 1
	}
	return 0
}

// spawn runs the world as local processes of this executable.
func spawn(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program to spawn it: %w", err)
	}
	argv := append([]string{exe}, o.childArgs()...)
	return rendezvous.Spawn(ctx, o.rdv.WorldSize, argv, nil, rendezvous.SpawnOptions{Stdout: stdout, Stderr: stderr})
}

// afterRun, when set (by tests), sees the metrics URL after the run, while
// the server still serves.
var afterRun func(metricsURL string)

// serveMetrics starts this rank's --metrics server (the port plus the
// local rank) and has Run register its engine, labelled rank="R".
func serveMetrics(o *options, rank int, stderr io.Writer, opt *a2abench.Options) (*metricsserver.Server, error) {
	addr, err := metricsserver.Offset(o.metrics, o.rdv.LocalRank)
	if err != nil {
		return nil, err
	}
	srv, err := metricsserver.Start(addr)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "# metrics of rank %d: %s\n", rank, srv.URL())
	opt.OnEngine = func(e *fabric.Engine) {
		if err := srv.AddEngine(e, "rank", strconv.Itoa(rank)); err != nil {
			fmt.Fprintln(stderr, "bench-a2a: metrics:", err)
		}
	}
	return srv, nil
}

// rank runs this process's rank of the job; rank 0 reports.
func rank(ctx context.Context, o *options, stdout, stderr io.Writer) (err error) {
	// -join-timeout (default 2m) bounds the wait for every rank to reach
	// the store, and the final barrier; a stuck launch says what it awaits.
	cfg := o.rdv
	cfg.Progress = func(msg string) { fmt.Fprintln(stderr, "bench-a2a:", msg) }
	joinTimeout := cfg.JoinTimeout
	if joinTimeout <= 0 {
		joinTimeout = rendezvous.DefaultJoinTimeout
	}
	var dirEngine *fabric.Engine // --directory: the engine published there
	if o.dir.url != "" {
		dr, err := joinDirectory(ctx, o, &cfg, stderr)
		if err != nil {
			return fmt.Errorf("meet through %s: %w", o.dir.url, err)
		}
		defer dr.close()
		dirEngine = dr.eng
	}
	g, err := rendezvous.Join(ctx, cfg)
	if err != nil {
		return fmt.Errorf("join the job: %w", err)
	}
	defer func() { err = errors.Join(err, g.Close()) }()
	if o.cpuProfile != "" {
		f, err := os.Create(fmt.Sprintf("%s.rank%d", o.cpuProfile, g.Rank()))
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return errors.Join(err, f.Close())
		}
		defer func() {
			pprof.StopCPUProfile()
			err = errors.Join(err, f.Close())
		}()
	}
	// The engine's warnings and errors go to stderr; -v adds its
	// lifecycle.
	opt := a2abench.Options{Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).
		With("rank", g.Rank())}
	if o.verbose {
		opt.LogLevel = slog.LevelDebug
	}
	opt.Engine = dirEngine
	if o.metrics != "" {
		srv, err := serveMetrics(o, g.Rank(), stderr, &opt)
		if err != nil {
			return err
		}
		defer func() {
			if afterRun != nil {
				afterRun(srv.URL())
			}
			_ = srv.Close()
		}()
		if dirEngine != nil {
			opt.OnEngine(dirEngine) // Run tells OnEngine only of engines it opens
		}
	}
	var p *printer
	if g.Rank() == 0 {
		// Rank 0 prints: the header before the first case, then the
		// rows of each case as soon as every rank has shared it.
		if p, err = newPrinter(o.json, append([]string{"bench-a2a"}, os.Args[1:]...), stdout, stderr); err != nil {
			return err
		}
		if o.spec.Floor && (o.spec.Backend == "" || o.spec.Backend == a2abench.BackendHost) {
			p.ctx, p.mpi = ctx, newMPIPeer(ctx, o.mpiOrder)
			defer p.mpi.close()
		}
		opt.OnStart, opt.OnCase = p.start, p.addCase
	}
	_, err = a2abench.Run(ctx, o.spec, g, opt)
	if err != nil && !errors.Is(err, a2abench.ErrCheck) {
		// The job is broken; every rank reports its own error.
		if p != nil {
			_ = p.finish(err)
		}
		return fmt.Errorf("rank %d: %w", g.Rank(), err)
	}
	// Rank 0 hosts the store: nobody leaves while others may still use it.
	// Every rank knows the same check verdicts, so all of them get here.
	bctx, cancel := context.WithTimeout(ctx, joinTimeout)
	defer cancel()
	if berr := g.Barrier(bctx); berr != nil {
		err = errors.Join(err, fmt.Errorf("final barrier: %w", berr))
	}
	if p != nil {
		if perr := p.finish(err); perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil {
		return fmt.Errorf("rank %d: %w", g.Rank(), err)
	}
	return nil
}
