package main

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/directory"
	"github.com/ferryrdma/ferry/fabric/directory/etcd"
)

// The directory functions of ABI 1.3 (ferry.h, "directory"): a handle
// per open directory, owning the publication and watch handles made
// through it, which it releases when it closes.

// dirObj is what a ferry_directory_t names.
type dirObj struct {
	d directory.Directory
	// mem is the shared in-process directory of a mem:// URL, whose
	// lifetime is not this handle's: closing the handle expires its
	// publications instead of closing the directory.
	mem     *directory.Memory
	memName string
	ctx     context.Context // ends at close: watches and lose-on-leave
	cancel  context.CancelFunc

	family          // its publication and watch handles; mu also guards stops
	stops  []func() // lose-on-leave watches
}

// pubObj is what a ferry_publication_t names.
type pubObj struct {
	dir *dirObj
	p   directory.Publication
}

// watchObj is what a ferry_dir_watch_t names: a watch's events, one
// reader at a time (mu), with an event that did not fit the caller's
// buffer kept first in line.
type watchObj struct {
	dir    *dirObj
	events <-chan directory.Event
	cancel context.CancelFunc

	mu      sync.Mutex
	pending []byte
	kind    directory.EventKind
	ended   bool
}

// memDirs are the in-process directories of mem:// URLs, by name, and
// how many open handles use each.
var memDirs struct {
	mu   sync.Mutex
	dirs map[string]*memDir
}

type memDir struct {
	m    *directory.Memory
	refs int
}

func directoryOf(h C.ferry_directory_t) (*dirObj, error) {
	return lookup[*dirObj](&handles, uint64(h), "directory")
}

// timed is how every timed call on a directory or publication handle
// runs: it looks up the object of kind T that h names, starts the
// call's deadline and hands both to body, whose error is the call's
// result.
func timed[T any](op, kind string, h uint64, timeoutMS C.int64_t, body func(o T, ctx context.Context) error) C.int {
	o, err := lookup[T](&handles, h, kind)
	if err != nil {
		return fail(err)
	}
	ctx, cancel, err := timeoutCtx(op, timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	return result(body(o, ctx))
}

// timedDir is timed for a directory handle.
func timedDir(op string, h C.ferry_directory_t, timeoutMS C.int64_t, body func(o *dirObj, ctx context.Context) error) C.int {
	return timed(op, "directory", uint64(h), timeoutMS, body)
}

// timedPub is timed for a publication handle.
func timedPub(op string, h C.ferry_publication_t, timeoutMS C.int64_t, body func(po *pubObj, ctx context.Context) error) C.int {
	return timed(op, "publication", uint64(h), timeoutMS, body)
}

// own gives v a handle that the directory releases when it closes. If
// the directory closed meanwhile, v gets none: undo then releases what v
// holds and the error wraps ErrClosed.
func (o *dirObj) own(op string, v any, undo func()) (uint64, error) {
	h := handles.add(v)
	if !o.adopt(h) {
		handles.remove(h)
		undo()
		return 0, fmt.Errorf("%s: %w", op, directory.ErrClosed)
	}
	return h, nil
}

// dirError gives directory errors their ABI category: a stored entry that
// failed validation is bad encoding (not a bad argument of the caller), a
// region that does not match its engine a NIC mismatch.
func dirError(op string, err error) error {
	var ee *directory.EntryError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && errors.Is(err, directory.ErrNICMismatch):
		return fmt.Errorf("%s: %w: %w", op, fabric.ErrNICMismatch, err)
	case errors.As(err, &ee):
		return fmt.Errorf("%s: %w: %w", op, fabric.ErrBadEncoding, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// cName reads a required C string argument.
func cName(op, arg string, s *C.char) (string, error) {
	if s == nil {
		return "", errInvalid(op, "%s is NULL", arg)
	}
	return C.GoString(s), nil
}

// cPairs reads count "key=value" strings into a map.
func cPairs(op, arg string, p **C.char, count C.size_t) (map[string]string, error) {
	if p == nil && count > 0 {
		return nil, errInvalid(op, "%s is NULL with count %d", arg, uint64(count))
	}
	if count > directory.MaxLabels {
		return nil, errInvalid(op, "%s: %d entries, at most %d", arg, uint64(count), directory.MaxLabels)
	}
	m := make(map[string]string, int(count))
	if count == 0 {
		return m, nil
	}
	for i, s := range unsafe.Slice(p, int(count)) {
		if s == nil {
			return nil, errInvalid(op, "%s[%d] is NULL", arg, i)
		}
		k, v, ok := strings.Cut(C.GoString(s), "=")
		if !ok || k == "" {
			return nil, errInvalid(op, "%s[%d] %q is not key=value", arg, i, C.GoString(s))
		}
		if _, dup := m[k]; dup {
			return nil, errInvalid(op, "%s[%d]: key %q repeated", arg, i, k)
		}
		m[k] = v
	}
	return m, nil
}

// entryJSON is an entry's JSON form in the ABI.
type entryJSON struct {
	Name   string            `json:"name"`
	NICs   int               `json:"nics"`
	Addrs  []string          `json:"addrs"`
	Labels map[string]string `json:"labels"`
}

func toJSON(e directory.Entry) entryJSON {
	j := entryJSON{Name: e.Name, NICs: e.NICs, Labels: maps.Clone(e.Labels)}
	if j.Labels == nil {
		j.Labels = map[string]string{}
	}
	for _, a := range e.Addrs {
		j.Addrs = append(j.Addrs, a.String())
	}
	return j
}

func marshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Entries are strings, ints and maps of strings: cannot fail.
		panic(err)
	}
	return string(b)
}

//export ferry_directory_open
func ferry_directory_open(curl *C.char, ttlMS, timeoutMS C.int64_t, out *C.ferry_directory_t) (rc C.int) {
	defer guard(&rc)
	const op = "directory open"
	if out == nil {
		return fail(errInvalid(op, "out is NULL"))
	}
	raw, err := cName(op, "url", curl)
	if err != nil {
		return fail(err)
	}
	if ttlMS < 0 {
		return fail(errInvalid(op, "ttl_ms %d (want >= 0)", int64(ttlMS)))
	}
	ctx, cancel, err := timeoutCtx(op, timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	o := &dirObj{family: family{children: make(map[uint64]struct{})}}
	switch {
	case strings.HasPrefix(raw, "mem://"):
		name := strings.TrimPrefix(raw, "mem://")
		if name == "" || strings.ContainsAny(name, "/?#") {
			return fail(errInvalid(op, "url %q: want mem://NAME", raw))
		}
		o.mem, o.memName = acquireMem(name), name
		o.d = o.mem
	case strings.HasPrefix(raw, "etcd://"):
		if o.d, err = openEtcd(ctx, op, raw, ttlMS, timeoutMS); err != nil {
			return fail(err)
		}
	default:
		return fail(errInvalid(op, "url %q: want etcd://HOST:PORT/PREFIX or mem://NAME", raw))
	}
	o.ctx, o.cancel = context.WithCancel(context.Background())
	*out = C.ferry_directory_t(handles.add(o))
	return C.int(codeOK)
}

// acquireMem returns the in-process directory of mem://name, made on
// first use, and counts one more handle using it.
func acquireMem(name string) *directory.Memory {
	memDirs.mu.Lock()
	defer memDirs.mu.Unlock()
	if memDirs.dirs == nil {
		memDirs.dirs = make(map[string]*memDir)
	}
	md := memDirs.dirs[name]
	if md == nil {
		md = &memDir{m: directory.NewMemory()}
		memDirs.dirs[name] = md
	}
	md.refs++
	return md.m
}

// releaseMem counts one handle fewer using mem://name, and closes the
// directory when it was the last.
func releaseMem(name string) {
	memDirs.mu.Lock()
	defer memDirs.mu.Unlock()
	if md := memDirs.dirs[name]; md != nil {
		if md.refs--; md.refs == 0 {
			delete(memDirs.dirs, name)
			_ = md.m.Close()
		}
	}
}

// openEtcd opens the directory of an etcd:// URL.
func openEtcd(ctx context.Context, op, raw string, ttlMS, timeoutMS C.int64_t) (directory.Directory, error) {
	cfg, err := etcd.ParseURL(raw)
	if err != nil {
		return nil, errInvalid(op, "url: %v", err)
	}
	if u, _ := url.Parse(raw); u != nil && (u.RawQuery != "" || u.Fragment != "") {
		return nil, errInvalid(op, "url %q: no query or fragment allowed", raw)
	}
	cfg.TTL = time.Duration(ttlMS) * time.Millisecond
	if cfg.TTL > 0 && cfg.TTL < time.Second {
		return nil, errInvalid(op, "ttl_ms %d: at least 1000 on etcd", int64(ttlMS))
	}
	cfg.DialTimeout = time.Duration(timeoutMS) * time.Millisecond
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = time.Millisecond
	}
	d, err := etcd.Open(ctx, cfg)
	if err != nil {
		if errors.Is(err, directory.ErrInvalid) {
			return nil, fmt.Errorf("%s: url %q: %w", op, raw, err)
		}
		return nil, fmt.Errorf("%s %q: %w: %w", op, raw, errUnavailable, err)
	}
	return d, nil
}

//export ferry_directory_close
func ferry_directory_close(h C.ferry_directory_t) (rc C.int) {
	defer guard(&rc)
	o, err := release[*dirObj](&handles, uint64(h), "directory")
	if err != nil {
		return fail(err)
	}
	o.mu.Lock()
	o.closed = true
	kids := make([]uint64, 0, len(o.children))
	for k := range o.children {
		kids = append(kids, k)
	}
	clear(o.children)
	stops := o.stops
	o.stops = nil
	o.mu.Unlock()
	o.cancel()
	for _, stop := range stops {
		stop()
	}
	for _, k := range kids {
		v, ok := handles.remove(k)
		if !ok {
			continue
		}
		switch c := v.(type) {
		case *watchObj:
			c.cancel()
		case *pubObj:
			if o.mem != nil {
				// What an etcd lease does when its renewal stops.
				_ = o.mem.Expire(c.p.Entry().Name)
			}
		}
	}
	if o.mem != nil {
		releaseMem(o.memName)
		return C.int(codeOK)
	}
	return result(dirError("directory close", o.d.Close()))
}

//export ferry_directory_publish
func ferry_directory_publish(h C.ferry_directory_t, eh C.ferry_engine_t, cname *C.char, labels **C.char, count C.size_t, timeoutMS C.int64_t, out *C.ferry_publication_t) (rc C.int) {
	defer guard(&rc)
	const op = "directory publish"
	return timedDir(op, h, timeoutMS, func(o *dirObj, ctx context.Context) error {
		eo, err := engineOf(eh)
		if err != nil {
			return err
		}
		if out == nil {
			return errInvalid(op, "out is NULL")
		}
		name, err := cName(op, "name", cname)
		if err != nil {
			return err
		}
		lm, err := cPairs(op, "labels", labels, count)
		if err != nil {
			return err
		}
		e, err := directory.EntryOf(eo.e, name, lm)
		if err != nil {
			return dirError(op, err)
		}
		p, err := o.d.Publish(ctx, e)
		if err != nil {
			return dirError(op, err)
		}
		ph, err := o.own(op, &pubObj{dir: o, p: p}, func() { _ = p.Close(ctx) })
		if err != nil {
			return err
		}
		*out = C.ferry_publication_t(ph)
		return nil
	})
}

//export ferry_publication_add_region
func ferry_publication_add_region(h C.ferry_publication_t, cname *C.char, dh C.ferry_descriptor_t, meta **C.char, count C.size_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	const op = "publication add region"
	return timedPub(op, h, timeoutMS, func(po *pubObj, ctx context.Context) error {
		name, err := cName(op, "name", cname)
		if err != nil {
			return err
		}
		d, err := descriptorOf(dh)
		if err != nil {
			return err
		}
		mm, err := cPairs(op, "meta", meta, count)
		if err != nil {
			return err
		}
		return dirError(op, po.p.PublishRegion(ctx, name, *d, mm))
	})
}

//export ferry_publication_remove_region
func ferry_publication_remove_region(h C.ferry_publication_t, cname *C.char, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	const op = "publication remove region"
	return timedPub(op, h, timeoutMS, func(po *pubObj, ctx context.Context) error {
		name, err := cName(op, "name", cname)
		if err != nil {
			return err
		}
		return dirError(op, po.p.WithdrawRegion(ctx, name))
	})
}

//export ferry_publication_set_labels
func ferry_publication_set_labels(h C.ferry_publication_t, labels **C.char, count C.size_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	const op = "publication set labels"
	return timedPub(op, h, timeoutMS, func(po *pubObj, ctx context.Context) error {
		lm, err := cPairs(op, "labels", labels, count)
		if err != nil {
			return err
		}
		return dirError(op, po.p.SetLabels(ctx, lm))
	})
}

//export ferry_publication_close
func ferry_publication_close(h C.ferry_publication_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	const op = "publication close"
	ctx, cancel, err := timeoutCtx(op, timeoutMS)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	po, err := release[*pubObj](&handles, uint64(h), "publication")
	if err != nil {
		return fail(err)
	}
	po.dir.disown(uint64(h))
	return result(dirError(op, po.p.Close(ctx)))
}

//export ferry_directory_lookup
func ferry_directory_lookup(h C.ferry_directory_t, cname *C.char, timeoutMS C.int64_t, buf *C.char, cp C.size_t, n *C.size_t) (rc C.int) {
	defer guard(&rc)
	const op = "directory lookup"
	return timedDir(op, h, timeoutMS, func(o *dirObj, ctx context.Context) error {
		name, err := cName(op, "name", cname)
		if err != nil {
			return err
		}
		e, err := o.d.Lookup(ctx, name)
		if err != nil {
			return dirError(op, err)
		}
		return copyText(op, marshal(toJSON(e)), buf, cp, n)
	})
}

// timedSelect is timedDir for the calls that answer with the entries
// find returns for the selector csel (NULL: every entry), as a JSON
// array; find's error is the call's.
func timedSelect(op string, h C.ferry_directory_t, csel *C.char, timeoutMS C.int64_t, buf *C.char, cp C.size_t, n *C.size_t,
	find func(o *dirObj, ctx context.Context, sel directory.Selector) ([]directory.Entry, error)) C.int {
	return timedDir(op, h, timeoutMS, func(o *dirObj, ctx context.Context) error {
		sel, err := parseSelector(op, csel)
		if err != nil {
			return err
		}
		es, err := find(o, ctx, sel)
		if err != nil {
			return err
		}
		return copyText(op, entriesJSON(es), buf, cp, n)
	})
}

// parseSelector reads an optional selector argument.
func parseSelector(op string, s *C.char) (directory.Selector, error) {
	if s == nil {
		return directory.Selector{}, nil
	}
	sel, err := directory.ParseSelector(C.GoString(s))
	if err != nil {
		return sel, errInvalid(op, "selector: %v", err)
	}
	return sel, nil
}

func entriesJSON(es []directory.Entry) string {
	out := make([]entryJSON, 0, len(es))
	for _, e := range es {
		out = append(out, toJSON(e))
	}
	return marshal(out)
}

//export ferry_directory_select
func ferry_directory_select(h C.ferry_directory_t, csel *C.char, timeoutMS C.int64_t, buf *C.char, cp C.size_t, n *C.size_t) (rc C.int) {
	defer guard(&rc)
	const op = "directory select"
	return timedSelect(op, h, csel, timeoutMS, buf, cp, n, func(o *dirObj, ctx context.Context, sel directory.Selector) ([]directory.Entry, error) {
		es, err := o.d.Select(ctx, sel)
		var ee *directory.EntryError
		if err != nil && !errors.As(err, &ee) {
			// Malformed entries are left out (the valid ones are still
			// the answer); anything else failed the select.
			return nil, dirError(op, err)
		}
		return es, nil
	})
}

//export ferry_directory_wait_for
func ferry_directory_wait_for(h C.ferry_directory_t, csel *C.char, count C.int32_t, timeoutMS C.int64_t, buf *C.char, cp C.size_t, n *C.size_t) (rc C.int) {
	defer guard(&rc)
	const op = "directory wait for"
	return timedSelect(op, h, csel, timeoutMS, buf, cp, n, func(o *dirObj, ctx context.Context, sel directory.Selector) ([]directory.Entry, error) {
		if count < 1 {
			return nil, errInvalid(op, "n %d (want >= 1)", int32(count))
		}
		// The handle's close ends the wait too.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(o.ctx, cancel)
		defer stop()
		es, err := directory.WaitFor(ctx, o.d, sel, int(count))
		if err != nil && o.ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", directory.ErrClosed, err)
		}
		return es, dirError(op, err)
	})
}

//export ferry_directory_region
func ferry_directory_region(h C.ferry_directory_t, cengine, cname *C.char, timeoutMS C.int64_t, desc *C.ferry_descriptor_t, buf *C.char, cp C.size_t, n *C.size_t) (rc C.int) {
	defer guard(&rc)
	const op = "directory region"
	return timedDir(op, h, timeoutMS, func(o *dirObj, ctx context.Context) error {
		engine, err := cName(op, "engine", cengine)
		if err != nil {
			return err
		}
		name, err := cName(op, "name", cname)
		if err != nil {
			return err
		}
		if desc == nil {
			return errInvalid(op, "desc is NULL")
		}
		r, err := o.d.Region(ctx, engine, name)
		if err != nil {
			return dirError(op, err)
		}
		meta := r.Meta
		if meta == nil {
			meta = map[string]string{}
		}
		if err := copyText(op, marshal(meta), buf, cp, n); err != nil {
			return err
		}
		d := r.Desc
		*desc = C.ferry_descriptor_t(handles.add(&d))
		return nil
	})
}

//export ferry_directory_watch
func ferry_directory_watch(h C.ferry_directory_t, timeoutMS C.int64_t, out *C.ferry_dir_watch_t) (rc C.int) {
	defer guard(&rc)
	const op = "directory watch"
	o, err := directoryOf(h)
	if err != nil {
		return fail(err)
	}
	if out == nil {
		return fail(errInvalid(op, "out is NULL"))
	}
	var events <-chan directory.Event
	cancel, err := startBounded(op, o.ctx, timeoutMS, func(ctx context.Context) (err error) {
		events, err = o.d.Watch(ctx)
		return err
	})
	if err != nil {
		return fail(dirError(op, err))
	}
	wh, err := o.own(op, &watchObj{dir: o, events: events, cancel: cancel}, cancel)
	if err != nil {
		return fail(err)
	}
	*out = C.ferry_dir_watch_t(wh)
	return C.int(codeOK)
}

// startBounded starts something that lives as long as the context it is
// given (a watch) but must begin within timeoutMS: on etcd, starting a
// watch reads the current entries first, which waits for a server that
// does not answer. The context ends when parent does, when the start
// overran its time (then the error wraps ErrTimeout), or at cancel.
func startBounded(op string, parent context.Context, timeoutMS C.int64_t, start func(context.Context) error) (context.CancelFunc, error) {
	if timeoutMS < 0 {
		return nil, errInvalid(op, "timeout %d ms (want >= 0)", int64(timeoutMS))
	}
	ctx, cancel := context.WithCancel(parent)
	timer := time.AfterFunc(time.Duration(timeoutMS)*time.Millisecond, cancel)
	err := start(ctx)
	if !timer.Stop() {
		cancel()
		return nil, fmt.Errorf("%s: not started within %d ms: %w", op, int64(timeoutMS), errors.Join(fabric.ErrTimeout, err))
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return cancel, nil
}

// eventJSON is an event's JSON form in the ABI.
type eventJSON struct {
	Kind  string     `json:"kind"`
	Entry *entryJSON `json:"entry,omitempty"`
	Error string     `json:"error,omitempty"`
}

func encodeEvent(ev directory.Event) []byte {
	j := eventJSON{Kind: ev.Kind.String()}
	if ev.Kind == directory.Rejected {
		if ev.Err != nil {
			j.Error = ev.Err.Error()
		}
	} else {
		e := toJSON(ev.Entry)
		j.Entry = &e
	}
	return []byte(marshal(j))
}

//export ferry_dir_watch_next
func ferry_dir_watch_next(h C.ferry_dir_watch_t, timeoutMS C.int64_t, kind *C.int32_t, buf *C.char, cp C.size_t, n *C.size_t) (rc C.int) {
	defer guard(&rc)
	const op = "directory watch next"
	w, err := lookup[*watchObj](&handles, uint64(h), "directory watch")
	if err != nil {
		return fail(err)
	}
	if timeoutMS < 0 {
		return fail(errInvalid(op, "timeout %d ms (want >= 0)", int64(timeoutMS)))
	}
	if !w.mu.TryLock() {
		return fail(fmt.Errorf("%s: another thread is reading this watch: %w", op, fabric.ErrBusy))
	}
	defer w.mu.Unlock()
	if w.pending == nil {
		if w.ended {
			return fail(fmt.Errorf("%s: %w", op, directory.ErrClosed))
		}
		var ev directory.Event
		var ok bool
		if timeoutMS == 0 {
			select {
			case ev, ok = <-w.events:
			default:
				return fail(fmt.Errorf("%s: no event: %w", op, fabric.ErrTimeout))
			}
		} else {
			t := time.NewTimer(time.Duration(timeoutMS) * time.Millisecond)
			select {
			case ev, ok = <-w.events:
				t.Stop()
			case <-t.C:
				return fail(fmt.Errorf("%s: no event within %d ms: %w", op, int64(timeoutMS), fabric.ErrTimeout))
			}
		}
		if !ok {
			w.ended = true
			return fail(fmt.Errorf("%s: watch ended: %w", op, directory.ErrClosed))
		}
		w.pending, w.kind = encodeEvent(ev), ev.Kind
	}
	if kind != nil {
		*kind = C.int32_t(w.kind)
	}
	if err := copyText(op, string(w.pending), buf, cp, n); err != nil {
		return fail(err)
	}
	w.pending = nil
	return C.int(codeOK)
}

//export ferry_dir_watch_close
func ferry_dir_watch_close(h C.ferry_dir_watch_t) (rc C.int) {
	defer guard(&rc)
	w, err := release[*watchObj](&handles, uint64(h), "directory watch")
	if err != nil {
		return fail(err)
	}
	w.dir.disown(uint64(h))
	w.cancel()
	return C.int(codeOK)
}

//export ferry_directory_lose_on_leave
func ferry_directory_lose_on_leave(h C.ferry_directory_t, eh C.ferry_engine_t, timeoutMS C.int64_t) (rc C.int) {
	defer guard(&rc)
	const op = "directory lose on leave"
	o, err := directoryOf(h)
	if err != nil {
		return fail(err)
	}
	eo, err := engineOf(eh)
	if err != nil {
		return fail(err)
	}
	var stopWatch func()
	cancel, err := startBounded(op, o.ctx, timeoutMS, func(ctx context.Context) (err error) {
		stopWatch, err = directory.LoseOnLeave(ctx, o.d, eo.e)
		return err
	})
	if err != nil {
		return fail(dirError(op, err))
	}
	stop := func() {
		cancel()
		stopWatch()
	}
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		stop()
		return fail(fmt.Errorf("%s: %w", op, directory.ErrClosed))
	}
	o.stops = append(o.stops, stop)
	o.mu.Unlock()
	return C.int(codeOK)
}

//export ferry_address_from_hex
func ferry_address_from_hex(chex *C.char, buf *C.uint8_t, cp C.size_t, n *C.size_t) (rc C.int) {
	defer guard(&rc)
	const op = "address from hex"
	s, err := cName(op, "hex", chex)
	if err != nil {
		return fail(err)
	}
	a, err := fabric.ParseAddress(s)
	if err != nil {
		return fail(fmt.Errorf("%s: %w", op, err))
	}
	b, err := a.MarshalBinary()
	if err != nil {
		return fail(fmt.Errorf("%s: %w", op, err))
	}
	return result(copyBytes(op, b, unsafe.Pointer(buf), cp, n))
}
