package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/ferryrdma/ferry/fabric/job"
)

// A client issues a seeded random stream of ops, one at a time, as a user
// session of a distributed tensor frontend would. It keeps a shadow copy of
// every tensor it owns, computes what each op must produce, and checks the
// checksum the workers report.

// shadow is a client's copy of one of its tensors.
type shadow struct {
	id    uint32
	kind  placement
	elems []uint32
}

// opStat is one op as its client saw it.
type opStat struct {
	Client int           `json:"client"`
	Kind   string        `json:"kind"`
	Bytes  int           `json:"bytes"`
	Took   time.Duration `json:"took_ns"`
}

type client struct {
	id      int
	c       config
	n       int // ops to run
	workers int
	rng     *rand.Rand
	snd     *sender
	replies chan msg
	live    []*shadow
	nextID  uint32
	ops     uint32
	stats   []opStat
}

// runClients runs every client of one phase concurrently and returns their
// ops. Replies come to one mailbox; route sends each to its client.
func runClients(ctx context.Context, r *job.Rank, c config, ops int, t *topology, route *router) ([]opStat, error) {
	var wg sync.WaitGroup
	errs := make([]error, c.Clients)
	cls := make([]*client, c.Clients)
	for i := range cls {
		// The same seed in every phase: relay and direct run the same ops.
		cls[i] = &client{id: i, c: c, n: ops, workers: t.workers, rng: rand.New(rand.NewPCG(c.Seed, uint64(i))),
			snd: &sender{r: r}, replies: route.channel(i)}
		wg.Go(func() { errs[i] = cls[i].run(ctx, t) })
	}
	wg.Wait()
	var all []opStat
	for i, cl := range cls {
		if errs[i] != nil {
			return nil, fmt.Errorf("client %d: %w", i, errs[i])
		}
		all = append(all, cl.stats...)
	}
	return all, nil
}

func (cl *client) run(ctx context.Context, t *topology) error {
	for range cl.n {
		if err := cl.step(ctx, t); err != nil {
			return err
		}
	}
	// Leave nothing behind for the next phase.
	for len(cl.live) > 0 {
		if err := cl.free(ctx, t, 0); err != nil {
			return err
		}
	}
	return cl.snd.drain(ctx)
}

// call sends one request and waits for its reply.
func (cl *client) call(ctx context.Context, t *topology, m msg, kind string, bytes int, want uint64) error {
	cl.ops++
	m.Client, m.Op = uint8(cl.id), cl.ops
	start := time.Now()
	if err := cl.snd.send(ctx, 0, m); err != nil {
		return err
	}
	var rep msg
	select {
	case rep = <-cl.replies:
	case <-ctx.Done():
		return fmt.Errorf("%s op %d: %w", kind, cl.ops, ctx.Err())
	}
	took := time.Since(start)
	switch {
	case rep.Op != cl.ops:
		return fmt.Errorf("reply to op %d while waiting for op %d", rep.Op, cl.ops)
	case rep.Flag == statusNoMemory:
		return fmt.Errorf("%s op %d: a worker's arena is full (raise -arena)", kind, cl.ops)
	case rep.Flag == statusMismatch:
		return job.Mismatch("client %d %s op %d: the workers' copies of the result differ", cl.id, kind, cl.ops)
	case rep.Sum != want:
		return job.Mismatch("client %d %s op %d (%s): checksum %#x, expected %#x", cl.id, kind, cl.ops, job.FormatSize(int64(bytes)), rep.Sum, want)
	}
	cl.stats = append(cl.stats, opStat{Client: cl.id, Kind: kind, Bytes: bytes, Took: took})
	return nil
}

// step picks and runs the next op of the stream.
func (cl *client) step(ctx context.Context, t *topology) error {
	pick := func(kind placement) *shadow {
		var of []*shadow
		for _, s := range cl.live {
			if s.kind == kind {
				of = append(of, s)
			}
		}
		if len(of) == 0 {
			return nil
		}
		return of[cl.rng.IntN(len(of))]
	}
	r := cl.rng.IntN(100)
	switch {
	case len(cl.live) < 2 || (r < 15 && len(cl.live) < cl.c.MaxLive):
		return cl.create(ctx, t, cl.rng.IntN(2) == 0, 0)
	case r < 15 || r >= 90:
		return cl.free(ctx, t, cl.rng.IntN(len(cl.live)))
	case r < 50:
		if a := pick(whole); a != nil {
			return cl.call(ctx, t, msg{Kind: reqMove, A: a.id}, "move", 4*len(a.elems), checksum(a.elems, 0))
		}
		return cl.create(ctx, t, false, 0)
	case r < 70:
		a := pick(whole)
		if a == nil {
			return cl.create(ctx, t, false, 0)
		}
		for _, b := range cl.live {
			if b != a && b.kind == whole && len(b.elems) == len(a.elems) {
				return cl.add(ctx, t, a, b)
			}
		}
		return cl.create(ctx, t, false, len(a.elems))
	default:
		a := pick(sharded)
		if a == nil {
			return cl.create(ctx, t, true, 0)
		}
		if r < 80 {
			return cl.matmul(ctx, t, a)
		}
		return cl.reduce(ctx, t, a)
	}
}

func (cl *client) newID() uint32 { cl.nextID++; return uint32(cl.id)<<24 | cl.nextID }

// create makes a tensor of a random size (or of elems elements). Sharded
// tensors split into equal shards of whole rows.
func (cl *client) create(ctx context.Context, t *topology, shard bool, elems int) error {
	if elems == 0 {
		elems = cl.c.Sizes[cl.rng.IntN(len(cl.c.Sizes))] / 4
	}
	unit := k
	if shard {
		unit = k * cl.workers
	}
	elems = max(elems/unit, 1) * unit
	s := &shadow{id: cl.newID(), kind: whole, elems: make([]uint32, elems)}
	seed := cl.rng.Uint64()
	fill(s.elems, seed, 0)
	m := msg{Kind: reqCreate, C: s.id, N: uint64(elems), Seed: seed}
	if shard {
		s.kind, m.Flag = sharded, 1
	}
	cl.live = append(cl.live, s)
	return cl.call(ctx, t, m, "create", 4*elems, checksum(s.elems, 0))
}

func (cl *client) free(ctx context.Context, t *topology, i int) error {
	s := cl.live[i]
	cl.live = slices.Delete(cl.live, i, i+1)
	return cl.call(ctx, t, msg{Kind: reqFree, A: s.id}, "free", 4*len(s.elems), 0)
}

func (cl *client) add(ctx context.Context, t *topology, a, b *shadow) error {
	c := &shadow{id: cl.newID(), kind: whole, elems: make([]uint32, len(a.elems))}
	add(c.elems, a.elems, b.elems)
	cl.live = append(cl.live, c)
	return cl.call(ctx, t, msg{Kind: reqAdd, A: a.id, B: b.id, C: c.id}, "add", 4*len(a.elems), checksum(c.elems, 0))
}

func (cl *client) matmul(ctx context.Context, t *topology, a *shadow) error {
	c := &shadow{id: cl.newID(), kind: replicated, elems: make([]uint32, len(a.elems))}
	matmul(c.elems, a.elems, uint64(c.id))
	cl.live = append(cl.live, c)
	return cl.call(ctx, t, msg{Kind: reqMatmul, A: a.id, C: c.id}, "matmul-allgather", 4*len(a.elems), checksum(c.elems, 0))
}

func (cl *client) reduce(ctx context.Context, t *topology, a *shadow) error {
	per := len(a.elems) / cl.workers
	c := &shadow{id: cl.newID(), kind: whole, elems: slices.Clone(a.elems[:per])}
	for w := 1; w < cl.workers; w++ {
		add(c.elems, c.elems, a.elems[w*per:(w+1)*per])
	}
	cl.live = append(cl.live, c)
	return cl.call(ctx, t, msg{Kind: reqReduce, A: a.id, C: c.id}, "sum-reduce", 4*len(a.elems), checksum(c.elems, 0))
}

// router hands each reply to its client's channel.
type router struct {
	chans []chan msg
}

func (rt *router) channel(i int) chan msg { return rt.chans[i] }

// run routes until ctx ends or the mailbox fails.
func (rt *router) run(ctx context.Context, mb *mailbox) error {
	for {
		m, err := mb.next(ctx)
		if err != nil {
			return err
		}
		if m.Kind != repDone || int(m.Client) >= len(rt.chans) {
			return fmt.Errorf("unexpected message kind %d for client %d", m.Kind, m.Client)
		}
		rt.chans[m.Client] <- m
	}
}
