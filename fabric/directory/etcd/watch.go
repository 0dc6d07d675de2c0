package etcd

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ferryrdma/ferry/fabric/directory"
)

// known is what a watch last saw of one engine entry.
type known struct {
	entry   directory.Entry
	closing bool
}

// Watch implements directory.Directory. It lists the engines, then
// watches for changes from the listed revision on. The client resumes the
// watch by itself across a restart of the server; should the server have
// compacted the revisions it missed, the watch lists again and reports the
// difference.
func (d *Directory) Watch(ctx context.Context) (<-chan directory.Event, error) {
	if err := d.closedErr("watch"); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(d.ctx, cancel)
	w := &watcher{d: d, ctx: ctx, out: make(chan directory.Event), seen: make(map[string]known)}
	rev, err := w.list()
	if err != nil {
		stop()
		cancel()
		return nil, fmt.Errorf("watch: %w", err)
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(w.out)
		defer cancel()
		defer stop()
		w.run(rev)
	}()
	return w.out, nil
}

type watcher struct {
	d       *Directory
	ctx     context.Context
	out     chan directory.Event
	seen    map[string]known
	pending []directory.Event // found by list, sent by run
	cluster uint64            // the cluster's ID when last listed
}

// checkEvery is how often a watch asks whether the server lost its data
// (see run).
const checkEvery = 3 * time.Second

// list reads the engines and queues the events that bring seen up to
// date. It returns the revision read.
func (w *watcher) list() (int64, error) {
	resp, err := w.d.cli.Get(w.ctx, w.d.prefix+"/engines/", clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	now := make(map[string]bool)
	for _, kv := range resp.Kvs {
		e, closing, err := directory.DecodeEntry(string(kv.Key), kv.Value)
		if err != nil {
			w.pending = append(w.pending, directory.Event{Kind: directory.Rejected, Err: err})
			continue
		}
		now[e.Name] = true
		w.put(e, closing)
	}
	for _, name := range slices.Sorted(maps.Keys(w.seen)) {
		if !now[name] {
			w.gone(name, false)
		}
	}
	w.cluster = resp.Header.ClusterId
	return resp.Header.Revision, nil
}

// lostData reports whether the server is not the one the watch follows: a
// cluster of another ID, or one whose revision went back (it restarted
// without its data). The client would resume the watch there from a
// revision the server has not reached, and miss everything until then.
func (w *watcher) lostData(rev int64) bool {
	ctx, cancel := context.WithTimeout(w.ctx, checkEvery)
	defer cancel()
	resp, err := w.d.cli.Get(ctx, w.d.prefix+"/engines/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return false // unreachable: the watch resumes when it is back
	}
	return resp.Header.ClusterId != w.cluster || resp.Header.Revision < rev
}

// put records a live or closing entry and queues Joined or Updated.
func (w *watcher) put(e directory.Entry, closing bool) {
	old, ok := w.seen[e.Name]
	w.seen[e.Name] = known{entry: e, closing: closing}
	switch {
	case closing:
	case !ok || old.closing:
		w.pending = append(w.pending, directory.Event{Kind: directory.Joined, Entry: e})
	case !entriesEqual(old.entry, e):
		w.pending = append(w.pending, directory.Event{Kind: directory.Updated, Entry: e})
	}
}

// gone queues Closed or Lost for a removed entry; closing says the
// removed value itself was marked closing.
func (w *watcher) gone(name string, closing bool) {
	k, ok := w.seen[name]
	if !ok {
		return
	}
	delete(w.seen, name)
	kind := directory.Lost
	if closing || k.closing {
		kind = directory.Closed
	}
	w.pending = append(w.pending, directory.Event{Kind: kind, Entry: k.entry})
}

func (w *watcher) flush() bool {
	for _, ev := range w.pending {
		select {
		case w.out <- ev:
		case <-w.ctx.Done():
			return false
		}
	}
	clear(w.pending)
	w.pending = w.pending[:0]
	return true
}

func (w *watcher) run(rev int64) {
	for w.flush() {
		// Its own context, so that a watch given up on (an error
		// response) is canceled in the client, not left running.
		wctx, wcancel := context.WithCancel(w.ctx)
		wch := w.d.cli.Watch(clientv3.WithRequireLeader(wctx), w.d.prefix+"/engines/",
			clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithPrevKV())
		tick := time.NewTicker(checkEvery)
	events:
		for {
			var resp clientv3.WatchResponse
			select {
			case r, ok := <-wch:
				if !ok {
					break events
				}
				resp = r
			case <-tick.C:
				if w.lostData(rev) {
					break events
				}
				continue
			}
			if resp.Err() != nil {
				break events
			}
			for _, ev := range resp.Events {
				key := string(ev.Kv.Key)
				switch ev.Type {
				case clientv3.EventTypePut:
					e, closing, err := directory.DecodeEntry(key, ev.Kv.Value)
					if err != nil {
						w.pending = append(w.pending, directory.Event{Kind: directory.Rejected, Err: err})
						continue
					}
					w.put(e, closing)
				case clientv3.EventTypeDelete:
					closing := false
					if ev.PrevKv != nil {
						_, closing, _ = directory.DecodeEntry(key, ev.PrevKv.Value)
					}
					w.gone(key[len(w.d.prefix+"/engines/"):], closing)
				}
			}
			rev = resp.Header.Revision
			if !w.flush() {
				tick.Stop()
				wcancel()
				return
			}
		}
		tick.Stop()
		wcancel()
		// The watch ended early: canceled for lack of a leader (the
		// server restarting), compacted, or following a server that lost
		// its data. List again, after a pause so
		// an unreachable server is not asked in a loop.
		for w.ctx.Err() == nil {
			select {
			case <-time.After(200 * time.Millisecond):
			case <-w.ctx.Done():
				return
			}
			lctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
			r, err := w.listCtx(lctx)
			cancel()
			if err == nil {
				rev = r
				break
			}
		}
		if w.ctx.Err() != nil {
			return
		}
	}
}

func (w *watcher) listCtx(ctx context.Context) (int64, error) {
	saved := w.ctx
	w.ctx = ctx
	defer func() { w.ctx = saved }()
	return w.list()
}

func entriesEqual(a, b directory.Entry) bool {
	return a.Name == b.Name && a.NICs == b.NICs && slices.Equal(a.Addrs, b.Addrs) && maps.Equal(a.Labels, b.Labels)
}
