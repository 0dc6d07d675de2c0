package etcd

import (
	"context"
	"errors"
	"fmt"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/directory"
)

// Config says which etcd cluster to use and how.
type Config struct {
	// Endpoints are the cluster's client URLs ("http://127.0.0.1:2379").
	Endpoints []string
	// Prefix is the key prefix of this directory ("/ferry/serving");
	// engines are under Prefix/engines/, regions under Prefix/regions/.
	Prefix string
	// TTL is the lease of every publication: a process that stops
	// renewing it (died, hung, cut off) is gone from the directory, and
	// Lost to watchers, within about TTL. Whole seconds; 0 means 10 s. The
	// server raises a TTL below its minimum (about 2 s by default).
	TTL time.Duration
	// DialTimeout bounds Open's first contact; 0 means 5 s.
	DialTimeout time.Duration
	// Logger receives the client library's logs; nil discards them.
	Logger *zap.Logger
}

// ParseURL reads etcd://HOST:PORT[,HOST:PORT...]/PREFIX into a Config
// (plain http endpoints; the prefix defaults to /ferry).
func ParseURL(s string) (Config, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Config{}, fmt.Errorf("parse directory url %q: %w: %w", s, directory.ErrInvalid, err)
	}
	if u.Scheme != "etcd" || u.Host == "" {
		return Config{}, fmt.Errorf("parse directory url %q: want etcd://HOST:PORT/PREFIX: %w", s, directory.ErrInvalid)
	}
	cfg := Config{Prefix: strings.TrimRight(u.Path, "/")}
	if cfg.Prefix == "" {
		cfg.Prefix = "/ferry"
	}
	for _, h := range strings.Split(u.Host, ",") {
		cfg.Endpoints = append(cfg.Endpoints, "http://"+h)
	}
	return cfg, nil
}

// Directory is a directory.Directory kept in etcd.
type Directory struct {
	cli    *clientv3.Client
	prefix string
	ttl    int64 // seconds
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ directory.Directory = (*Directory)(nil)

// Open connects to the cluster and checks that it answers within
// cfg.DialTimeout (or ctx).
func Open(ctx context.Context, cfg Config) (*Directory, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("open etcd directory: no endpoints: %w", directory.ErrInvalid)
	}
	if cfg.Prefix == "" || !strings.HasPrefix(cfg.Prefix, "/") || strings.HasSuffix(cfg.Prefix, "/") {
		return nil, fmt.Errorf("open etcd directory: prefix %q must start and not end with /: %w", cfg.Prefix, directory.ErrInvalid)
	}
	if cfg.TTL == 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.TTL < time.Second {
		return nil, fmt.Errorf("open etcd directory: ttl %v below 1s: %w", cfg.TTL, directory.ErrInvalid)
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Logger:      lg,
		// Notice a server that went away within seconds, so the
		// client reconnects to it (or another) when it is back.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		// gRPC's reconnection backoff grows to minutes by default: a
		// server back after an outage must be reached again within a
		// fraction of the TTL, before the leases it kept run out.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: grpcbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2,
				MaxDelay: max(cfg.TTL/4, 100*time.Millisecond)},
			MinConnectTimeout: time.Second,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("open etcd directory %v: %w", cfg.Endpoints, err)
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if _, err := cli.Get(cctx, cfg.Prefix+"/engines/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("open etcd directory %v: %w", cfg.Endpoints, err)
	}
	d := &Directory{cli: cli, prefix: cfg.Prefix, ttl: int64((cfg.TTL + time.Second - 1) / time.Second)}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	return d, nil
}

// Client returns the underlying etcd client.
func (d *Directory) Client() *clientv3.Client { return d.cli }

func (d *Directory) engineKey(name string) string { return d.prefix + "/engines/" + name }
func (d *Directory) regionKey(engine, name string) string {
	return d.prefix + "/regions/" + engine + "/" + name
}

func (d *Directory) closedErr(what string) error {
	if d.ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, directory.ErrClosed)
	}
	return nil
}

// Close ends watches and the renewal of publications (their entries then
// expire: close publications first to remove them in order), and the
// client.
func (d *Directory) Close() error {
	d.cancel()
	d.wg.Wait()
	return d.cli.Close()
}

// Publish implements directory.Directory.
func (d *Directory) Publish(ctx context.Context, e directory.Entry) (directory.Publication, error) {
	if err := d.closedErr("publish " + e.Name); err != nil {
		return nil, err
	}
	b, err := directory.EncodeEntry(e)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", e.Name, err)
	}
	p := &publication{d: d, name: e.Name, entry: e.Clone(), value: b, regions: make(map[string][]byte), done: make(chan struct{})}
	lease, err := p.create(ctx)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", e.Name, err)
	}
	p.lease = lease
	p.ctx, p.cancel = context.WithCancel(d.ctx)
	d.wg.Add(1)
	go p.keep()
	return p, nil
}

// Lookup implements directory.Directory.
func (d *Directory) Lookup(ctx context.Context, name string) (directory.Entry, error) {
	if err := d.closedErr("lookup " + name); err != nil {
		return directory.Entry{}, err
	}
	if err := directory.CheckName("engine name", name); err != nil {
		return directory.Entry{}, fmt.Errorf("lookup: %w", err)
	}
	resp, err := d.cli.Get(ctx, d.engineKey(name))
	if err != nil {
		return directory.Entry{}, fmt.Errorf("lookup %s: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return directory.Entry{}, fmt.Errorf("lookup %s: %w", name, directory.ErrNotFound)
	}
	e, closing, err := directory.DecodeEntry(string(resp.Kvs[0].Key), resp.Kvs[0].Value)
	if err != nil {
		return directory.Entry{}, fmt.Errorf("lookup %s: %w", name, err)
	}
	if closing {
		return directory.Entry{}, fmt.Errorf("lookup %s: closing: %w", name, directory.ErrNotFound)
	}
	return e, nil
}

// Select implements directory.Directory.
func (d *Directory) Select(ctx context.Context, sel directory.Selector) ([]directory.Entry, error) {
	if err := d.closedErr("select " + sel.String()); err != nil {
		return nil, err
	}
	resp, err := d.cli.Get(ctx, d.prefix+"/engines/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("select %s: %w", sel, err)
	}
	var out []directory.Entry
	var bad []error
	for _, kv := range resp.Kvs {
		e, closing, err := directory.DecodeEntry(string(kv.Key), kv.Value)
		switch {
		case err != nil:
			bad = append(bad, err)
		case !closing && sel.Matches(e):
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b directory.Entry) int { return strings.Compare(a.Name, b.Name) })
	if len(bad) > 0 {
		return out, fmt.Errorf("select %s: %w", sel, errors.Join(bad...))
	}
	return out, nil
}

// Region implements directory.Directory. The engine entry and the region
// are read in one transaction, so the check sees one moment.
func (d *Directory) Region(ctx context.Context, engine, name string) (directory.Region, error) {
	if err := d.closedErr("region " + engine + "/" + name); err != nil {
		return directory.Region{}, err
	}
	if err := errors.Join(directory.CheckName("engine name", engine), directory.CheckName("region name", name)); err != nil {
		return directory.Region{}, fmt.Errorf("region: %w", err)
	}
	resp, err := d.cli.Txn(ctx).Then(clientv3.OpGet(d.engineKey(engine)), clientv3.OpGet(d.regionKey(engine, name))).Commit()
	if err != nil {
		return directory.Region{}, fmt.Errorf("region %s/%s: %w", engine, name, err)
	}
	ek, rk := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	if len(ek) == 0 {
		return directory.Region{}, fmt.Errorf("region %s/%s: engine: %w", engine, name, directory.ErrNotFound)
	}
	if len(rk) == 0 {
		return directory.Region{}, fmt.Errorf("region %s/%s: %w", engine, name, directory.ErrNotFound)
	}
	e, _, err := directory.DecodeEntry(string(ek[0].Key), ek[0].Value)
	if err != nil {
		return directory.Region{}, fmt.Errorf("region %s/%s: %w", engine, name, err)
	}
	r, err := directory.DecodeRegion(string(rk[0].Key), rk[0].Value, &e)
	if err != nil {
		return directory.Region{}, fmt.Errorf("region %s/%s: %w", engine, name, err)
	}
	return r, nil
}

// publication is one entry under a lease, renewed by keep.
type publication struct {
	d      *Directory
	ctx    context.Context // ends renewal
	cancel context.CancelFunc
	done   chan struct{}

	name string // the entry's name, fixed

	mu      sync.Mutex
	entry   directory.Entry
	value   []byte
	lease   clientv3.LeaseID
	regions map[string][]byte // stored form by name: published again with a new lease
	closed  bool
	err     error // why renewal stopped for good

	// unsure is a lease whose create transaction failed without an
	// answer and whose revoke failed too: the entry may stand under it.
	// Only create (on the renewal goroutine, or Publish's) touches it.
	unsure clientv3.LeaseID
}

func (p *publication) Entry() directory.Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.entry.Clone()
}

// SetLabels rewrites the entry under its lease, if the entry is still
// this publication's.
func (p *publication) SetLabels(ctx context.Context, labels map[string]string) error {
	lease, err := p.live()
	if err != nil {
		return fmt.Errorf("set labels of %s: %w", p.name, err)
	}
	p.mu.Lock()
	e := p.entry.Clone()
	p.mu.Unlock()
	e.Labels = maps.Clone(labels)
	b, err := directory.EncodeEntry(e)
	if err != nil {
		return fmt.Errorf("set labels of %s: %w", p.name, err)
	}
	key := p.d.engineKey(p.name)
	resp, err := p.d.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", lease)).
		Then(clientv3.OpPut(key, string(b), clientv3.WithLease(lease))).Commit()
	if err != nil {
		return fmt.Errorf("set labels of %s: %w", p.name, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("set labels of %s: entry no longer under this publication's lease: %w", p.name, directory.ErrNotFound)
	}
	p.mu.Lock()
	p.entry, p.value = e, b
	p.mu.Unlock()
	return nil
}

// create grants a lease and puts the entry and the regions under it,
// unless the entry's key exists (ErrExists: another live publication).
func (p *publication) create(ctx context.Context) (clientv3.LeaseID, error) {
	g, err := p.d.cli.Grant(ctx, p.d.ttl)
	if err != nil {
		return 0, fmt.Errorf("grant lease: %w", err)
	}
	key := p.d.engineKey(p.name)
	p.mu.Lock()
	ops := []clientv3.Op{clientv3.OpPut(key, string(p.value), clientv3.WithLease(g.ID))}
	for _, name := range slices.Sorted(maps.Keys(p.regions)) {
		ops = append(ops, clientv3.OpPut(p.d.regionKey(p.name, name), string(p.regions[name]), clientv3.WithLease(g.ID)))
	}
	p.mu.Unlock()
	resp, err := p.d.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(ops...).Else(clientv3.OpGet(key)).Commit()
	if err == nil && !resp.Succeeded {
		// The key exists: ours after all if it stands under the lease of
		// an earlier try whose answer was lost (the server restarting
		// mid-commit): go on with that lease.
		if prev := p.unsure; prev != 0 && len(resp.Responses) == 1 {
			if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 && clientv3.LeaseID(kvs[0].Lease) == prev {
				p.unsure = 0
				p.revokeQuietly(ctx, g.ID)
				return prev, nil
			}
		}
		err = directory.ErrExists
	}
	if err != nil {
		if !errors.Is(err, directory.ErrExists) && !p.revokeQuietly(ctx, g.ID) {
			// Neither the commit's outcome nor the revoke is known.
			p.unsure = g.ID
		}
		return 0, err
	}
	p.unsure = 0
	return g.ID, nil
}

// revokeQuietly revokes a lease, outliving ctx by up to 5 s, and reports
// whether the server confirmed it gone.
func (p *publication) revokeQuietly(ctx context.Context, id clientv3.LeaseID) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := p.d.cli.Revoke(rctx, id)
	return err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound)
}

// keep renews the lease. When renewal ends without Close (the lease
// expired, or the server was unreachable for a TTL) it asks the server
// whether the lease is still there (a restarted server keeps leases) and
// goes on with it, or publishes everything again under a new lease.
func (p *publication) keep() {
	defer p.d.wg.Done()
	defer close(p.done)
	backoff := 100 * time.Millisecond
	for p.ctx.Err() == nil {
		p.mu.Lock()
		lease := p.lease
		p.mu.Unlock()
		if ch, err := p.d.cli.KeepAlive(p.ctx, lease); err == nil {
			for range ch {
				backoff = 100 * time.Millisecond
			}
		}
		for p.ctx.Err() == nil {
			ok, err := p.recover(lease)
			if ok {
				break
			}
			if errors.Is(err, directory.ErrExists) {
				p.mu.Lock()
				p.err = fmt.Errorf("publish %s again after its lease expired: %w", p.name, err)
				p.mu.Unlock()
				return
			}
			select {
			case <-time.After(backoff):
			case <-p.ctx.Done():
			}
			// Retry well within a TTL: after an outage the lease the
			// server kept lives one TTL (plus an election) from its restart,
			// and a renewal that comes later loses the entry.
			backoff = min(2*backoff, p.d.retryMax())
		}
	}
}

// retryMax is the longest wait between tries to reach the server: a
// quarter of the TTL, at least 100 ms.
func (d *Directory) retryMax() time.Duration {
	return max(time.Duration(d.ttl)*time.Second/4, 100*time.Millisecond)
}

// recover reports whether renewal can go on: the lease still lives, or
// the entry was published again under a new one.
func (p *publication) recover(lease clientv3.LeaseID) (bool, error) {
	ctx, cancel := context.WithTimeout(p.ctx, time.Duration(p.d.ttl)*time.Second)
	defer cancel()
	ttl, err := p.d.cli.TimeToLive(ctx, lease)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		// Expired, or the server lost its data: publish again.
	case err != nil:
		return false, err
	case ttl.TTL > 0:
		return true, nil
	}
	id, err := p.create(ctx)
	if err != nil {
		return false, err
	}
	p.mu.Lock()
	p.lease = id
	p.mu.Unlock()
	return true, nil
}

// live returns the current lease, or why the publication cannot change.
func (p *publication) live() (clientv3.LeaseID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed, p.d.ctx.Err() != nil:
		return 0, directory.ErrClosed
	case p.err != nil:
		return 0, p.err
	}
	return p.lease, nil
}

func (p *publication) PublishRegion(ctx context.Context, name string, desc fabric.Descriptor, meta map[string]string) error {
	lease, err := p.live()
	if err != nil {
		return fmt.Errorf("publish region %s/%s: %w", p.name, name, err)
	}
	r := directory.Region{Engine: p.name, Name: name, Desc: desc, Meta: meta}
	b, err := directory.EncodeRegion(r, p.Entry())
	if err != nil {
		return fmt.Errorf("publish region %s/%s: %w", p.name, name, err)
	}
	p.mu.Lock()
	p.regions[name] = b
	p.mu.Unlock()
	if _, err := p.d.cli.Put(ctx, p.d.regionKey(p.name, name), string(b), clientv3.WithLease(lease)); err != nil {
		return fmt.Errorf("publish region %s/%s: %w", p.name, name, err)
	}
	return nil
}

func (p *publication) WithdrawRegion(ctx context.Context, name string) error {
	if _, err := p.live(); err != nil {
		return fmt.Errorf("withdraw region %s/%s: %w", p.name, name, err)
	}
	p.mu.Lock()
	_, ok := p.regions[name]
	delete(p.regions, name)
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("withdraw region %s/%s: %w", p.name, name, directory.ErrNotFound)
	}
	if _, err := p.d.cli.Delete(ctx, p.d.regionKey(p.name, name)); err != nil {
		return fmt.Errorf("withdraw region %s/%s: %w", p.name, name, err)
	}
	return nil
}

// Close marks the entry closing, then revokes its lease, which removes it
// and its regions: watchers see Closed. Should the revoke fail (the server
// unreachable), the entry expires within the TTL, still marked closing.
func (p *publication) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	<-p.done
	// Read after renewal ended: it may have published again under a
	// new lease meanwhile.
	p.mu.Lock()
	lease := p.lease
	p.mu.Unlock()
	if p.d.ctx.Err() != nil {
		return fmt.Errorf("close %s: %w", p.name, directory.ErrClosed)
	}
	b, err := directory.EncodeClosing(p.Entry())
	if err != nil {
		return fmt.Errorf("close %s: %w", p.name, err)
	}
	key := p.d.engineKey(p.name)
	// Only if the entry is still ours: after a lost lease someone else may
	// hold the name.
	if _, err := p.d.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", lease)).
		Then(clientv3.OpPut(key, string(b), clientv3.WithLease(lease))).Commit(); err != nil {
		return fmt.Errorf("close %s: %w", p.name, err)
	}
	// A lease the server no longer knows took what stood under it along.
	if _, err := p.d.cli.Revoke(ctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("close %s: revoke lease: %w", p.name, err)
	}
	return nil
}
