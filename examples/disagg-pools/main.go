// Command disagg-pools runs a prefill pool and a decode pool that meet
// through a directory, the way disaggregated serving scales them: engines
// come and go, and nobody holds a fixed list of peers.
//
// A prefill process opens an engine and publishes it under role=prefill.
// A decode process, started whenever, publishes its KV pool as the region
// "kv", waits for the prefill engines it needs (directory.WaitFor), and
// sends each request to one of them over the side channel; the prefill
// looks the decode's region up in the directory and streams the request's
// KV into it chunk by chunk, one immediate per chunk. The decode watches
// the directory: when a prefill process dies, its lease runs out, its
// entry is reported lost, and the requests it was streaming start again
// on another prefill engine. The decode prints how long after the lost
// engine's last write the directory reported it gone.
//
// With etcd (every process its own program):
//
//	etcd --data-dir /tmp/etcd &                 # 127.0.0.1:2379
//	disagg-pools prefill -directory etcd://127.0.0.1:2379/serving -name p0 -provider ipc &
//	disagg-pools prefill -directory etcd://127.0.0.1:2379/serving -name p1 -provider ipc &
//	disagg-pools decode  -directory etcd://127.0.0.1:2379/serving -name d0 -provider ipc -prefills 2
//	kill -9 %2    # while the decode runs: its requests on p0 fail over to p1
//
// In one process, with the in-process directory (no etcd), where killing
// a prefill is simulated by closing its engine and dropping its entry:
//
//	disagg-pools demo -provider mem
//
// Every byte of every request is checked at the decode against the
// pattern the request's id determines; a wrong byte ends the program with
// status 3. This directory uses only ferry's public packages and can be
// copied into a module of its own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/directory"
	"github.com/ferryrdma/ferry/fabric/directory/etcd"
	_ "github.com/ferryrdma/ferry/providers" // every transport: mem, shm, tcp, ipc, verbs, efa
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// errBadData is a request whose bytes did not match their pattern.
var errBadData = errors.New("wrong byte")

// options are the flags every role shares.
type options struct {
	dir      string
	name     string
	provider string
	ttl      time.Duration
	chunks   int
	chunkKiB int
	chunkDur time.Duration
	prefills int
	requests int
	inflight int
	timeout  time.Duration
}

func (o *options) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.dir, "directory", "", "etcd://HOST:PORT/PREFIX (demo: mem://NAME, the default)")
	fs.StringVar(&o.name, "name", "", "this engine's name in the directory (default ROLE-PID)")
	fs.StringVar(&o.provider, "provider", "ipc", "transport: mem (demo only), shm, tcp, ipc, verbs, efa")
	fs.DurationVar(&o.ttl, "ttl", 2*time.Second, "lease of this process's entry: a dead process is gone within it")
	fs.IntVar(&o.chunks, "chunks", 8, "KV chunks per request (one write and one immediate each)")
	fs.IntVar(&o.chunkKiB, "chunk-kib", 64, "KiB per chunk")
	fs.DurationVar(&o.chunkDur, "chunk-time", 20*time.Millisecond, "prefill: simulated compute per chunk")
	fs.IntVar(&o.prefills, "prefills", 2, "decode: prefill engines to wait for before starting")
	fs.IntVar(&o.requests, "requests", 40, "decode: requests to serve")
	fs.IntVar(&o.inflight, "inflight", 4, "decode: requests in flight at once")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "bound on the whole run")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: disagg-pools prefill|decode|demo [flags]")
		return 2
	}
	role := args[0]
	fs := flag.NewFlagSet("disagg-pools "+role, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	o.bind(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if o.name == "" {
		o.name = fmt.Sprintf("%s-%d", role, os.Getpid())
	}
	if o.chunks < 1 || o.chunkKiB < 1 || o.inflight < 1 || o.requests < 1 || o.prefills < 1 {
		fmt.Fprintln(stderr, "disagg-pools: -chunks, -chunk-kib, -inflight, -requests and -prefills must be >= 1")
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	var err error
	switch role {
	case "prefill":
		err = withDirectory(ctx, o, func(d directory.Directory) error { return runPrefill(ctx, o, d, stdout, nil) })
	case "decode":
		err = withDirectory(ctx, o, func(d directory.Directory) error {
			_, err := runDecode(ctx, o, d, stdout)
			return err
		})
	case "demo":
		err = runDemo(ctx, o, stdout)
	default:
		fmt.Fprintf(stderr, "disagg-pools: unknown role %q: want prefill, decode or demo\n", role)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errBadData):
		fmt.Fprintf(stderr, "disagg-pools %s: %v\n", role, err)
		return 3
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return 130
	}
	fmt.Fprintf(stderr, "disagg-pools %s: %v\n", role, err)
	return 1
}

// withDirectory opens the etcd directory of -directory for fn.
func withDirectory(ctx context.Context, o options, fn func(directory.Directory) error) error {
	cfg, err := etcd.ParseURL(o.dir)
	if err != nil {
		return fmt.Errorf("-directory: %w", err)
	}
	cfg.TTL = o.ttl
	d, err := etcd.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer d.Close()
	return fn(d)
}

// openEngine opens an engine on the named transport (tcp is libfabric's
// tcp;ofi_rxm pinned to loopback).
func openEngine(ctx context.Context, provider string) (*fabric.Engine, error) {
	cfg := fabric.Config{Transport: provider}
	if provider == "tcp" {
		cfg.Transport, cfg.Node = "tcp;ofi_rxm", "127.0.0.1"
	}
	return fabric.Open(ctx, cfg)
}
