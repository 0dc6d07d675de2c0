package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/ferryrdma/ferry/bench/internal/a2abench"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/directory"
	"github.com/ferryrdma/ferry/fabric/directory/etcd"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// dirFlags are --directory, --name and --listen: ranks that meet through
// a directory instead of a launcher. Each rank opens its engine,
// publishes it under the prefix labelled as a bench-a2a rank, waits for
// --world-size of them, and takes its rank from the order of their names
// (directory.WorldConfig); the first rank's listener serves the world's
// rendezvous store. FERRY_JOB_TOKEN must be the same on every rank.
type dirFlags struct {
	url    string
	name   string
	listen string
}

func (f *dirFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "directory", "", "etcd://HOST:PORT/PREFIX: ranks meet there instead of through a launcher (--world-size of them; ranks in --name order)")
	fs.StringVar(&f.name, "name", "", "with --directory: this rank's entry name (default bench-a2a-HOSTNAME-PID)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:0", "with --directory: this rank's rendezvous listener (the first rank's serves the world)")
}

// check refuses --directory with the flags that place ranks otherwise.
func (f *dirFlags) check(fs *flag.FlagSet, local bool, world int) error {
	if f.url == "" {
		return nil
	}
	if local {
		return fmt.Errorf("--directory gathers separate rank processes: drop --spawn, --mode and --graph")
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["rank"] || set["master"] {
		return fmt.Errorf("--directory gives every rank its place: drop --rank and --master")
	}
	if !set["world-size"] || world < 1 {
		return fmt.Errorf("--directory needs --world-size")
	}
	if _, err := etcd.ParseURL(f.url); err != nil {
		return fmt.Errorf("--directory: %w", err)
	}
	return nil
}

// dirRank is this rank's place in a world gathered through the directory.
type dirRank struct {
	eng *fabric.Engine
	dir *etcd.Directory
	pub directory.Publication
}

// joinDirectory opens this rank's engine, publishes it and gathers the
// world; cfg gets the rank, world size and master it found.
func joinDirectory(ctx context.Context, o *options, cfg *rendezvous.Config, stderr io.Writer) (_ *dirRank, err error) {
	f := o.dir
	dc, err := etcd.ParseURL(f.url)
	if err != nil {
		return nil, fmt.Errorf("--directory: %w", err)
	}
	r := &dirRank{}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.dir, err = etcd.Open(ctx, dc); err != nil {
		return nil, err
	}
	// The engine a2abench.Run would open, opened first so that the entry
	// carries its addresses.
	poll := fabric.PollAdaptive
	if o.spec.Backend == a2abench.BackendCUDA {
		poll = fabric.PollSpin
	}
	r.eng, err = fabric.Open(ctx, fabric.Config{Transport: o.spec.Transport, NICs: max(1, o.spec.Config.NICsPerGPU),
		Node: o.spec.Node, Poll: poll, Logger: slog.New(slog.NewTextHandler(stderr, nil))})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	name := f.name
	if name == "" {
		host, _ := os.Hostname()
		name = fmt.Sprintf("bench-a2a-%s-%d", host, os.Getpid())
	}
	labels := map[string]string{"role": "bench-a2a", directory.RendezvousLabel: ln.Addr().String()}
	me, err := directory.EntryOf(r.eng, name, labels)
	if err != nil {
		ln.Close()
		return nil, err
	}
	if r.pub, err = r.dir.Publish(ctx, me); err != nil {
		ln.Close()
		return nil, err
	}
	// The gathering is bounded like the join that follows it.
	wait := cfg.JoinTimeout
	if wait <= 0 {
		wait = rendezvous.DefaultJoinTimeout
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	sel := directory.SelectorOf(map[string]string{"role": "bench-a2a"})
	got, err := directory.WorldConfig(wctx, r.dir, me, sel, o.rdv.WorldSize, ln, *cfg)
	if err != nil {
		ln.Close()
		return nil, err
	}
	fmt.Fprintf(stderr, "bench-a2a: %s is rank %d of %d through %s (master %s)\n", name, got.Rank, got.WorldSize, f.url, got.Master)
	*cfg = got
	return r, nil
}

// close withdraws the entry and closes the engine and the directory.
func (r *dirRank) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r.pub != nil {
		_ = r.pub.Close(ctx)
	}
	if r.eng != nil {
		_ = r.eng.Close(ctx)
	}
	if r.dir != nil {
		_ = r.dir.Close()
	}
}
