package job

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// Body is what every rank runs once its engine is open and the ranks know
// each other's addresses. It must return on every rank (a rank that returns
// early leaves its peers waiting at the closing barrier until the run's
// deadline).
type Body func(ctx context.Context, r *Rank) error

// Run runs body as every rank of a job of world ranks, started the way
// o.Launch says, and returns the first failure. In spawn mode this process
// only waits for its children (their rank 0 prints the results).
func Run(ctx context.Context, o Options, world int, body Body) error {
	err := launch(ctx, o, world, body)
	if err != nil && ctx.Err() != nil {
		// SIGINT or SIGTERM: say so rather than list every wait it ended.
		return fmt.Errorf("%w (%v)", ErrInterrupted, err)
	}
	return err
}

func launch(ctx context.Context, o Options, world int, body Body) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	tr := providers[o.Provider]
	switch mode := o.launchMode(); mode {
	case "spawn":
		if !tr.procs {
			return fmt.Errorf("%w: provider %s works inside one process only: use -launch inproc", ErrUsage, o.Provider)
		}
		return spawn(ctx, o, world)
	case "inproc":
		if !tr.inproc {
			return fmt.Errorf("%w: provider %s must not have two engines in one process (libfabric 1.17 shm can crash "+
				"when one of them closes): use -launch spawn", ErrUsage, o.Provider)
		}
		return inproc(ctx, o, world, body)
	default:
		cfg := o.rdv
		if cfg.WorldSize != world {
			return fmt.Errorf("%w: this program runs %d ranks but the launcher started %d (-launch spawn starts them itself)",
				ErrUsage, world, cfg.WorldSize)
		}
		return runRank(ctx, o, cfg, body)
	}
}

// spawn re-runs this program as world child processes, each told by
// rendezvous.SpawnLocal's environment which rank it is.
func spawn(ctx context.Context, o Options, world int) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// The same flags, then -launch env: a later flag overrides an earlier one.
	argv := append([]string{exe}, o.argv[1:]...)
	argv = append(argv, "-launch=env")
	err = rendezvous.SpawnLocal(ctx, world, argv, nil)
	var se *rendezvous.SpawnError
	if errors.As(err, &se) {
		for _, r := range se.Ranks {
			if r.ExitCode == ExitMismatch {
				return fmt.Errorf("%w: rank %d found wrong data (its stderr says what)", ErrMismatch, r.Rank)
			}
		}
	}
	return err
}

// inproc runs every rank as a goroutine with its own engine. The ranks
// still meet through rendezvous, over a loopback socket this function
// opens for rank 0, so the body is the same code in both modes. The first
// rank to fail cancels the others.
func inproc(ctx context.Context, o Options, world int, body Body) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		ln.Close()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := range world {
		cfg := rendezvous.Config{Rank: r, WorldSize: world, LocalRank: r, Master: ln.Addr().String(),
			Token: hex.EncodeToString(tok[:]), Source: "inproc"}
		if r == 0 {
			cfg.Listener = ln // Join takes it over
		}
		wg.Go(func() {
			if errs[r] = runRank(ctx, o, cfg, body); errs[r] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	// Report the cause, not the cancellations it set off.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return errors.Join(errs...)
}

// runRank is one rank's life: join, open the engine, meet the peers, run
// the body, quiesce, close.
func runRank(ctx context.Context, o Options, cfg rendezvous.Config, body Body) (err error) {
	g, err := rendezvous.Join(ctx, cfg)
	if err != nil {
		return fmt.Errorf("rank %d: join: %w", cfg.Rank, err)
	}
	defer g.Close()
	r := &Rank{ID: g.Rank(), World: g.WorldSize(), Group: g, opts: o, Out: io.Discard, Err: os.Stderr}
	if r.ID == 0 {
		r.Out = os.Stdout
		if o.JSON == "-" {
			r.Out = os.Stderr // stdout carries only the JSON document
		}
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("rank %d: %w", r.ID, err)
		}
	}()

	tr := providers[o.Provider]
	poll, _ := fabric.ParsePollMode(o.Poll)
	level := slog.LevelWarn
	if o.Verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("rank", r.ID)
	r.Engine, err = fabric.Open(ctx, fabric.Config{Transport: tr.name, Node: tr.node, NICs: o.NICs, Poll: poll,
		Logger: logger, LogLevel: level})
	if err != nil {
		return fmt.Errorf("open engine: %w", err)
	}
	defer r.close()
	r.Info = r.Engine.Info()
	if r.ID == 0 {
		writeInfo(r.Out, r.Info)
	}

	// Every rank learns every other rank's main address (the side channel's
	// destination) and NIC count (descriptors must match it).
	cards, err := Gather(ctx, r, card{Addr: r.Info.Main, NICs: r.Engine.NICs(), Transport: r.Info.Transport})
	if err != nil {
		return fmt.Errorf("exchange addresses: %w", err)
	}
	for i, c := range cards {
		if c.NICs != r.Engine.NICs() || c.Transport != r.Info.Transport {
			return fmt.Errorf("rank %d runs %s with %d nics, rank %d %s with %d: %w",
				i, c.Transport, c.NICs, r.ID, r.Info.Transport, r.Engine.NICs(), fabric.ErrNICMismatch)
		}
		r.Peers = append(r.Peers, c.Addr)
	}
	if r.ID == 0 {
		fmt.Fprintf(r.Out, "ranks: %d, %s\n", r.World, launchName(cfg))
	}

	if err := body(ctx, r); err != nil {
		return err
	}
	// Quiesce: nobody closes an engine a peer may still be writing into.
	if err := r.Barrier(ctx); err != nil {
		return fmt.Errorf("closing barrier: %w", err)
	}
	return nil
}

func launchName(cfg rendezvous.Config) string {
	switch cfg.Source {
	case "inproc":
		return "goroutines of one process, one engine each"
	case "ferry":
		return "one process each"
	default:
		return "one process each, started by " + cfg.Source
	}
}

// card is what a rank tells every other rank at startup.
type card struct {
	Addr      fabric.Address `json:"addr"`
	NICs      int            `json:"nics"`
	Transport string         `json:"transport"`
}

// writeInfo prints what Engine.Info reports: the first thing a user should
// look at when a run is slower than expected.
func writeInfo(w io.Writer, in fabric.Info) {
	link := "n/a"
	if in.LinkSpeed > 0 {
		link = fmt.Sprintf("%.0f Gbps", float64(in.LinkSpeed)/1e9)
	}
	fmt.Fprintf(w, "engine: provider=%s transport=%s poll=%s link=%s\n", in.Provider, in.Transport, in.Poll, link)
	if in.Reason != "" {
		fmt.Fprintf(w, "  chosen: %s\n", in.Reason)
	}
	for _, g := range in.Groups {
		var doms []string
		for _, d := range g.Domains {
			doms = append(doms, fmt.Sprintf("%s#%d", d.Name, d.Index))
		}
		fmt.Fprintf(w, "  group %s: %s\n", g.Device, strings.Join(doms, " "))
	}
	fmt.Fprintf(w, "  main address: %s\n", in.Main)
	if in.Transport == "shm" || in.Transport == "mem" || strings.HasPrefix(in.Transport, "tcp") {
		fmt.Fprintln(w, "  note: a loopback transport: figures measure this host's CPU and memory, not a NIC")
	}
}

// closeTimeout bounds how long a closing engine drains.
const closeTimeout = 10 * time.Second
