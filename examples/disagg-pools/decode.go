package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/directory"
)

// spareSlots are KV slots beyond -inflight: a slot a lost prefill was
// writing is never used again (a prefill cut off rather than dead could
// still write into it), so each failover retires one.
const spareSlots = 32

// maxAttempts bounds the prefill engines one request is tried on.
const maxAttempts = 4

// decodeResult is what a decode run did.
type decodeResult struct {
	Served, Verified, FailedOver int
	// LostAfter is, per prefill engine the directory reported lost, the
	// time from its last write seen here to the report: how long a dead
	// engine went unnoticed (at most about the lease TTL).
	LostAfter map[string]time.Duration
}

// pool is the decode's view of the prefill engines, kept by a watch of
// the directory.
type pool struct {
	mu        sync.Mutex
	live      map[string]directory.Entry
	lost      map[string]time.Time // when the directory reported it gone
	lastWrite map[string]time.Time // the last chunk seen from it
	changed   chan struct{}        // closed and replaced on every change
	next      int
}

func newPool() *pool {
	return &pool{live: make(map[string]directory.Entry), lost: make(map[string]time.Time),
		lastWrite: make(map[string]time.Time), changed: make(chan struct{})}
}

func (p *pool) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// pick returns a live prefill engine other than those in avoid, round
// robin, waiting for one while there is none.
func (p *pool) pick(ctx context.Context, avoid []string) (directory.Entry, error) {
	for {
		p.mu.Lock()
		var names []string
		for n := range p.live {
			if !slices.Contains(avoid, n) {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		if len(names) > 0 {
			e := p.live[names[p.next%len(names)]]
			p.next++
			p.mu.Unlock()
			return e, nil
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return directory.Entry{}, fmt.Errorf("no prefill engine left: %w", ctx.Err())
		}
	}
}

func (p *pool) isLost(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.lost[name]
	return ok
}

func (p *pool) wrote(name string) {
	p.mu.Lock()
	p.lastWrite[name] = time.Now()
	p.mu.Unlock()
}

// watch keeps the pool until ctx ends, and reports what it sees.
func (p *pool) watch(ctx context.Context, d directory.Directory, res *decodeResult, resMu *sync.Mutex, ttl time.Duration, out io.Writer) error {
	events, err := d.Watch(ctx)
	if err != nil {
		return err
	}
	sel, _ := directory.ParseSelector("role=prefill")
	go func() {
		for ev := range events {
			if ev.Kind == directory.Rejected || !sel.Matches(ev.Entry) {
				continue
			}
			name := ev.Entry.Name
			p.mu.Lock()
			switch ev.Kind {
			case directory.Joined, directory.Updated:
				p.live[name] = ev.Entry
			case directory.Lost, directory.Closed:
				delete(p.live, name)
				now := time.Now()
				p.lost[name] = now
				if ev.Kind == directory.Lost {
					after := now.Sub(p.lastWrite[name])
					if p.lastWrite[name].IsZero() {
						after = 0
					}
					resMu.Lock()
					res.LostAfter[name] = after
					resMu.Unlock()
					fmt.Fprintf(out, "decode: prefill %s lost at %s: its entry expired %.2f s after its last write seen here (lease TTL %v)\n",
						name, now.Format(time.RFC3339Nano), after.Seconds(), ttl)
				} else {
					fmt.Fprintf(out, "decode: prefill %s closed its entry\n", name)
				}
			}
			p.notify()
			p.mu.Unlock()
		}
	}()
	return nil
}

// runDecode serves o.requests requests through the prefill pool.
func runDecode(ctx context.Context, o options, d directory.Directory, out io.Writer) (decodeResult, error) {
	res := decodeResult{LostAfter: make(map[string]time.Duration)}
	var resMu sync.Mutex
	// The KV pool: slots of one request each. It outlives the engine
	// (deferred calls run last first).
	chunkBytes := o.chunkKiB << 10
	slots := o.inflight + spareSlots
	slotBytes := o.chunks * chunkBytes
	kv, err := fabric.AllocHost(slots * slotBytes)
	if err != nil {
		return res, err
	}
	defer kv.Free()
	eng, err := openEngine(ctx, o.provider)
	if err != nil {
		return res, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = eng.Close(cctx)
	}()
	kvRegion, err := eng.RegisterHost(kv, fabric.AccessRemoteWrite)
	if err != nil {
		return res, err
	}
	desc, err := kvRegion.Descriptor()
	if err != nil {
		return res, err
	}
	entry, err := directory.EntryOf(eng, o.name, map[string]string{"role": "decode"})
	if err != nil {
		return res, err
	}
	pub, err := d.Publish(ctx, entry)
	if err != nil {
		return res, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = pub.Close(cctx)
	}()
	meta := map[string]string{"slots": fmt.Sprint(slots), "slot_bytes": fmt.Sprint(slotBytes)}
	if err := pub.PublishRegion(ctx, "kv", desc, meta); err != nil {
		return res, err
	}

	// Sends to a prefill the directory reports gone fail at once.
	stopLose, err := directory.LoseOnLeave(ctx, d, eng)
	if err != nil {
		return res, err
	}
	defer stopLose()

	// A decode started late finds the prefill pool already there.
	t0 := time.Now()
	wctx, cancelWait := context.WithTimeout(ctx, 30*time.Second)
	found, err := directory.WaitFor(wctx, d, directory.SelectorOf(map[string]string{"role": "prefill"}), o.prefills)
	cancelWait()
	if err != nil {
		return res, fmt.Errorf("find %d prefill engines: %w", o.prefills, err)
	}
	names := make([]string, len(found))
	for i, e := range found {
		names[i] = e.Name
	}
	fmt.Fprintf(out, "decode %s: found prefill engines %v in %.3f s\n", o.name, names, time.Since(t0).Seconds())

	p := newPool()
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	if err := p.watch(wctx, d, &res, &resMu, o.ttl, out); err != nil {
		return res, err
	}

	free := make(chan uint32, slots)
	for s := range slots {
		free <- uint32(s)
	}
	var nextID, nextImm atomic.Uint32
	nextImm.Store(0x1000)
	var wg sync.WaitGroup
	errs := make(chan error, o.inflight)
	scratch := make([][]byte, o.inflight)
	for w := range o.inflight {
		scratch[w] = make([]byte, chunkBytes)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				id := nextID.Add(1) - 1
				if int(id) >= o.requests {
					return
				}
				failovers, err := serve(ctx, o, eng, p, kv.Bytes(), free, &nextImm, scratch[w], id, out)
				resMu.Lock()
				res.FailedOver += failovers
				if err == nil {
					res.Served++
					res.Verified++
				}
				resMu.Unlock()
				if err != nil {
					errs <- fmt.Errorf("request %d: %w", id, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	fmt.Fprintf(out, "decode %s: %d requests served, %d verified, %d failed over\n", o.name, res.Served, res.Verified, res.FailedOver)
	return res, errors.Join(all...)
}

// serve runs request id on a prefill engine, and on another when the
// directory reports that one gone; it returns how many times it moved.
func serve(ctx context.Context, o options, eng *fabric.Engine, p *pool, kv []byte, free chan uint32,
	nextImm *atomic.Uint32, scratch []byte, id uint32, out io.Writer) (int, error) {
	chunkBytes := o.chunkKiB << 10
	var tried []string
	for attempt := 0; attempt < maxAttempts; attempt++ {
		pf, err := p.pick(ctx, tried)
		if err != nil {
			return attempt, err
		}
		tried = append(tried, pf.Name)
		var slot uint32
		select {
		case slot = <-free:
		case <-ctx.Done():
			return attempt, ctx.Err()
		}
		// A fresh immediate per attempt: chunks a lost engine wrote before
		// it died are not counted toward the next attempt.
		imm := nextImm.Add(1)
		counter, err := eng.ImmCounter(imm)
		if err != nil {
			return attempt, err
		}
		done, why, err := attemptOn(ctx, o, eng, p, pf, counter, request{ID: id, Slot: slot, Imm: imm,
			Chunks: uint32(o.chunks), ChunkBytes: uint32(chunkBytes), Decode: o.name})
		eng.RemoveImmCount(imm)
		if err != nil {
			return attempt, err
		}
		if !done {
			// Retired: see spareSlots.
			fmt.Fprintf(out, "decode: request %d: prefill %s %s, again on another\n", id, pf.Name, why)
			continue
		}
		base := int(slot) * o.chunks * chunkBytes
		for c := range o.chunks {
			if err := check(kv[base+c*chunkBytes:base+(c+1)*chunkBytes], scratch, id, uint32(c)); err != nil {
				return attempt, err
			}
		}
		free <- slot
		return attempt, nil
	}
	return maxAttempts, fmt.Errorf("tried %v: every one was lost", tried)
}

// attemptOn sends the request to pf and waits for its chunks; false, and
// why, when pf is found gone first: the directory reported it lost, or
// the engine found it lost while sending (a dead process's endpoint, or
// an address the directory already reported gone).
func attemptOn(ctx context.Context, o options, eng *fabric.Engine, p *pool, pf directory.Entry, counter *fabric.ImmCounter, r request) (bool, string, error) {
	t := fabric.NewTransfer()
	err := eng.Send(ctx, pf.Main(), r.encode(), fabric.Notify(t))
	if err == nil {
		err = t.Wait(ctx)
	}
	if err != nil {
		if errors.Is(err, fabric.ErrPeerLost) {
			return false, "lost before the request reached it", nil
		}
		return false, "", fmt.Errorf("send to %s: %w", pf.Name, err)
	}
	// Each chunk is a single write sharded over the NICs of both engines,
	// one immediate per shard.
	perChunk := int64(fabric.ExpectedImms(fabric.SingleShape(fabric.Sharded(0)), pf.NICs, eng.NICs()))
	if perChunk == 0 {
		return false, "", fmt.Errorf("prefill %s publishes %d nics: %w", pf.Name, pf.NICs, fabric.ErrNICMismatch)
	}
	seen := int64(0)
	for {
		// Short waits, so that a loss the directory reports is acted on
		// promptly; a wait that times out gives its credits back.
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := counter.Wait(wctx, int64(r.Chunks)*perChunk)
		cancel()
		if err == nil {
			p.wrote(pf.Name)
			return true, "", nil
		}
		if ctx.Err() != nil {
			return false, "", ctx.Err()
		}
		if n := counter.Count(); n > seen {
			seen = n
			p.wrote(pf.Name)
		}
		if p.isLost(pf.Name) {
			return false, fmt.Sprintf("gone after %d of %d chunks", seen/perChunk, r.Chunks), nil
		}
	}
}
