// Command tensor-moves runs a distributed tensor frontend in the shape of
// GT: a dispatcher that owns every tensor's placement, W workers that hold
// the bytes in registered arenas, and C concurrent clients issuing seeded
// random streams of create, move, add, matmul-allgather, sum-reduce and
// free. Control goes over the side channel only (Engine.Send into
// BouncingRecvs); the question is where the bytes go.
//
// -mode relay moves every tensor the way GT does today: source worker ->
// dispatcher -> destination, the dispatcher waiting for each move's bytes
// before it forwards them (and before it serves anyone else). -mode direct
// has the source worker write one-sided into the destination's arena, the
// destination counting the write's immediate before it computes: the
// dispatcher sees control messages only. -mode both (the default) runs the
// same streams both ways. It prints op latency by kind and size, the bytes
// that went through the dispatcher, each client's latencies (how fair the
// service was) and the direct/relay speedup. Every result is checksummed by
// the workers against the client's own copy (a mismatch exits 3).
//
//	go run ./examples/tensor-moves -provider shm
//	go run ./examples/tensor-moves -provider tcp -workers 3 -clients 4 -sizes 64K,1M,8M
//
// Rank 0 is the dispatcher, ranks 1..W the workers, rank W+1 hosts the
// clients (one goroutine each, sharing the rank's engine).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/job"
	_ "github.com/ferryrdma/ferry/providers" // every transport; a program may import only those it runs on
)

const program = "tensor-moves"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

type config struct {
	Workers int      `json:"workers"`
	Clients int      `json:"clients"`
	Ops     int      `json:"ops_per_client"`
	Sizes   []int    `json:"sizes"`
	Modes   []string `json:"modes"`
	Warmup  int      `json:"warmup_ops"` // untimed ops per client in each mode first
	MaxLive int      `json:"max_live"`
	Arena   int      `json:"arena_bytes"`
	Seed    uint64   `json:"seed"`
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	var o job.Options
	var c config
	var sizes, mode, arenaSize string
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.Bind(fs)
	fs.IntVar(&c.Workers, "workers", 2, "workers")
	fs.IntVar(&c.Clients, "clients", 3, "concurrent clients")
	fs.IntVar(&c.Ops, "ops", 60, "ops per client and mode")
	fs.StringVar(&sizes, "sizes", "16K,256K,2M", "tensor sizes, comma list (K, M suffixes)")
	fs.StringVar(&mode, "mode", "both", "how tensors move: relay (through the dispatcher), direct (worker to worker) or both")
	fs.IntVar(&c.Warmup, "warmup", 5, "untimed ops per client in each mode first (connection setup)")
	fs.IntVar(&c.MaxLive, "max-live", 6, "tensors a client keeps at most")
	fs.StringVar(&arenaSize, "arena", "64M", "each worker's registered arena")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the clients' streams")
	err := o.Parse(fs, args)
	if err == nil {
		err = c.finish(sizes, mode, arenaSize)
	}
	if err == nil {
		err = job.Run(ctx, o, c.Workers+2, func(ctx context.Context, r *job.Rank) error { return runRank(ctx, r, c) })
	}
	return job.ExitCode(program, err, stderr)
}

func (c *config) finish(sizes, mode, arenaSize string) error {
	switch mode {
	case "relay", "direct":
		c.Modes = []string{mode}
	case "both":
		c.Modes = []string{"relay", "direct"}
	default:
		return fmt.Errorf("%w: -mode %q: want relay, direct or both", job.ErrUsage, mode)
	}
	ss, err := job.ParseSizes(sizes)
	if err != nil {
		return err
	}
	for _, s := range ss {
		c.Sizes = append(c.Sizes, int(s))
	}
	a, err := job.ParseSize(arenaSize)
	if err != nil {
		return err
	}
	c.Arena = int(a)
	switch {
	case c.Workers < 1 || c.Workers > 62:
		return fmt.Errorf("%w: -workers %d: want 1 to 62", job.ErrUsage, c.Workers)
	case c.Clients < 1 || c.Clients > 255 || c.Ops < 1 || c.Warmup < 0 || c.MaxLive < 2:
		return fmt.Errorf("%w: want 1 to 255 clients, at least one op and -max-live 2", job.ErrUsage)
	case slices.Max(c.Sizes) > c.Arena/4:
		return fmt.Errorf("%w: a %s tensor in a %s arena: raise -arena", job.ErrUsage, job.FormatSize(int64(slices.Max(c.Sizes))), arenaSize)
	}
	return nil
}

// topology is who is where: every worker's arena and the dispatcher's
// staging buffer (the relay's hop).
type topology struct {
	workers    int
	clientRank int
	arenas     []fabric.Descriptor
	staging    fabric.Descriptor
}

type card struct {
	Region *fabric.Descriptor `json:"region,omitempty"`
}

// outcome is what each rank reports per phase.
type outcome struct {
	Ops      [][]opStat      `json:"ops,omitempty"`      // the client rank
	Wall     []time.Duration `json:"wall_ns,omitempty"`  // the client rank: each phase
	Dispatch []dispatchStats `json:"dispatch,omitempty"` // the dispatcher
}

func runRank(ctx context.Context, r *job.Rank, c config) error {
	t := &topology{workers: c.Workers, clientRank: c.Workers + 1}
	var mine card
	var region *job.Buffer
	var err error
	switch {
	case r.ID == 0: // the relay's staging buffer: the largest tensor
		region, err = r.Alloc(slices.Max(c.Sizes), fabric.AccessRemoteWrite)
	case r.ID <= c.Workers:
		region, err = r.Alloc(c.Arena, fabric.AccessRemoteWrite)
	}
	if err != nil {
		return err
	}
	if region != nil {
		mine.Region = &region.Desc
	}
	// Receives are posted before the exchange, so no control message can
	// arrive before its receiver is ready.
	mb, err := newMailbox(r)
	if err != nil {
		return err
	}
	cards, err := job.Gather(ctx, r, mine)
	if err != nil {
		return fmt.Errorf("exchange descriptors: %w", err)
	}
	for w := range c.Workers {
		t.arenas = append(t.arenas, *cards[1+w].Region)
	}
	t.staging = *cards[0].Region
	snd := &sender{r: r}

	var out outcome
	route := &router{}
	if r.ID == t.clientRank {
		for range c.Clients {
			route.chans = append(route.chans, make(chan msg, 1))
		}
		// The router runs as long as the clients; if it fails, their waits
		// end with its error.
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		routed := make(chan struct{})
		go func() {
			defer close(routed)
			cancel(route.run(ctx, mb))
		}()
		defer func() { cancel(nil); <-routed }()
	}
	// A short untimed phase in each mode first connects every pair that
	// will talk (on tcp the first message to a new peer waits for the
	// connection).
	type phase struct {
		mode string
		ops  int
	}
	var phases []phase
	if c.Warmup > 0 {
		for _, mode := range c.Modes {
			phases = append(phases, phase{mode, c.Warmup})
		}
	}
	for _, mode := range c.Modes {
		phases = append(phases, phase{mode, c.Ops})
	}
	for i, ph := range phases {
		mode, timed := ph.mode, i >= len(phases)-len(c.Modes)
		if err := r.Barrier(ctx); err != nil {
			return err
		}
		switch {
		case r.ID == 0:
			d := &dispatcher{r: r, c: c, t: t, mb: mb, snd: snd, relay: mode == "relay", staging: region}
			st, err := d.run(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", mode, err)
			}
			if timed {
				out.Dispatch = append(out.Dispatch, st)
			}
		case r.ID <= c.Workers:
			if err := workerLoop(ctx, r, mb, snd, t, region); err != nil {
				return fmt.Errorf("%s: %w", mode, err)
			}
		default:
			start := time.Now()
			ops, err := runClients(ctx, r, c, ph.ops, t, route)
			if err != nil {
				if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, ctx.Err()) {
					err = cause
				}
				return fmt.Errorf("%s: %w", mode, err)
			}
			if timed {
				out.Wall = append(out.Wall, time.Since(start))
				out.Ops = append(out.Ops, ops)
			}
			if err := snd.send(ctx, 0, msg{Kind: reqPhaseEnd}); err != nil {
				return err
			}
		}
	}
	if err := snd.drain(ctx); err != nil {
		return err
	}
	return report(ctx, r, c, out)
}
