package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/directory"
	"github.com/ferryrdma/ferry/fabric/directory/etcd"
)

// directoryFlags are serve's and client's --directory flags.
type directoryFlags struct {
	url    string // --directory etcd://HOST:PORT/PREFIX
	name   string // serve: the entry's name
	labels string // serve: key=value,...
	sel    string // client: the selector finding the server
}

func (f *directoryFlags) bind(cmd string, fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&f.url, "directory", "", "etcd://HOST:PORT/PREFIX: serve publishes itself there, client finds its server there")
	switch cmd {
	case "serve":
		fs.StringVar(&f.name, "name", "", "serve: the directory entry's name (default fabric-debug-HOSTNAME-PID)")
		fs.StringVar(&f.labels, "labels", "role=fabric-debug", "serve: the directory entry's labels, key=value comma list")
	case "client":
		fs.StringVar(&f.sel, "select", "", "client: label selector of the server in --directory (role=prefill,model=m1)")
	}
}

// openDirectory opens the etcd directory of --directory.
func openDirectory(ctx context.Context, url string) (*etcd.Directory, error) {
	cfg, err := etcd.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("--directory: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return etcd.Open(cctx, cfg)
}

func parseLabels(s string) (map[string]string, error) {
	out := make(map[string]string)
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("--labels %q: %q is not key=value: %w", s, kv, fabric.ErrInvalidArgument)
		}
		out[k] = v
	}
	return out, nil
}

// publisher publishes the server engine once it is open; close removes
// the entry in order.
type publisher struct {
	f      *directoryFlags
	log    io.Writer
	mu     sync.Mutex
	server *fabric.Engine
	dir    *etcd.Directory
	pub    directory.Publication
}

// watchEngines chains onto spec.OnEngine to learn the server engine.
func (p *publisher) watchEngines(prev func(*fabric.Engine, string)) func(*fabric.Engine, string) {
	return func(e *fabric.Engine, role string) {
		if prev != nil {
			prev(e, role)
		}
		if role == "server" {
			p.mu.Lock()
			p.server = e
			p.mu.Unlock()
		}
	}
}

// publish puts the server engine's entry in the directory.
func (p *publisher) publish(ctx context.Context) error {
	p.mu.Lock()
	eng := p.server
	p.mu.Unlock()
	if eng == nil {
		return fmt.Errorf("publish: no server engine opened")
	}
	labels, err := parseLabels(p.f.labels)
	if err != nil {
		return err
	}
	name := p.f.name
	if name == "" {
		host, _ := os.Hostname()
		name = fmt.Sprintf("fabric-debug-%s-%d", host, os.Getpid())
	}
	e, err := directory.EntryOf(eng, name, labels)
	if err != nil {
		return err
	}
	if p.dir, err = openDirectory(ctx, p.f.url); err != nil {
		return err
	}
	if p.pub, err = p.dir.Publish(ctx, e); err != nil {
		return err
	}
	fmt.Fprintf(p.log, "# published as %s in %s (labels %s)\n", e.Name, p.f.url, p.f.labels)
	return nil
}

func (p *publisher) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if p.pub != nil {
		_ = p.pub.Close(ctx)
	}
	if p.dir != nil {
		_ = p.dir.Close()
	}
}

// findServer returns the main address of the first engine (by name)
// matching --select in --directory.
func findServer(ctx context.Context, f *directoryFlags, log io.Writer) (fabric.Address, error) {
	sel, err := directory.ParseSelector(f.sel)
	if err != nil {
		return fabric.Address{}, fmt.Errorf("--select: %w", err)
	}
	d, err := openDirectory(ctx, f.url)
	if err != nil {
		return fabric.Address{}, err
	}
	defer d.Close()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	found, err := d.Select(sctx, sel)
	if err != nil && len(found) == 0 {
		return fabric.Address{}, fmt.Errorf("select %q in %s: %w", f.sel, f.url, err)
	}
	if len(found) == 0 {
		return fabric.Address{}, fmt.Errorf("select %q in %s: no engine: %w", f.sel, f.url, directory.ErrNotFound)
	}
	fmt.Fprintf(log, "# directory: %d engines match %q; using %s at %s\n", len(found), f.sel, found[0].Name, found[0].Main())
	return found[0].Main(), nil
}
