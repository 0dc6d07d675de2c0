package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/job"
)

// decode owns the page pool: for every request it picks free pages at
// random (a real pool is fragmented), asks the prefill for the prompt,
// times each layer's arrival by counting its immediates, and checks every
// page.
func decode(ctx context.Context, r *job.Rank, c config) error {
	pb, blocks := c.pageBytes(), c.blocks()
	poolBlocks := c.PoolFactor * blocks
	// Layer l's pool: pages [l*poolBlocks, (l+1)*poolBlocks), as vLLM keeps
	// one KV tensor per layer indexed by the same block numbers.
	pool, err := r.Alloc(c.Layers*poolBlocks*pb, fabric.AccessRemoteWrite)
	if err != nil {
		return err
	}
	if _, err := job.Broadcast(ctx, r, 1, poolCard{Pool: &pool.Desc, Blocks: poolBlocks}); err != nil {
		return fmt.Errorf("publish the pool: %w", err)
	}
	prefillAddr := r.Peers[0]
	rng := rand.New(rand.NewPCG(c.Seed, 2))
	free := make([]uint32, poolBlocks)
	for i := range free {
		free[i] = uint32(i)
	}

	var lines []timeline
	total := c.Warmup + c.Requests*len(c.Modes)
	for i := range total {
		stream := c.Modes[0]
		if i >= c.Warmup {
			stream = c.Modes[(i-c.Warmup)%len(c.Modes)]
		}
		rng.Shuffle(len(free), func(a, b int) { free[a], free[b] = free[b], free[a] })
		q := request{ID: uint32(i), Stream: stream, Table: slices.Clone(free[:blocks])}
		tl, err := fetch(ctx, r, c, prefillAddr, q)
		if err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		// Every byte of every page, at the pool page the table named.
		for l := range c.Layers {
			for j, p := range q.Table {
				off := (l*poolBlocks + int(p)) * pb
				if bad := checkPage(pool.Bytes()[off:off+pb], c.Seed, q.ID, l, j); bad >= 0 {
					return job.Mismatch("request %d layer %d page %d (pool page %d): byte %d is wrong", i, l, j, p, bad)
				}
			}
		}
		tl.Warmup = i < c.Warmup
		lines = append(lines, tl)
	}
	done := fabric.NewTransfer()
	if err := r.Engine.Send(ctx, prefillAddr, []byte{msgQuit}, fabric.Notify(done)); err != nil {
		return err
	}
	if err := done.Wait(ctx); err != nil {
		return err
	}
	return report(ctx, r, c, outcome{Lines: lines})
}

// fetch asks for one prompt and returns its timeline, measured on this
// process's clock from the immediates' arrivals. The request's immediates
// are a lease of one value per layer, and its end is the prefill's
// notification; retiring the lease afterwards (or on a timeout) makes any
// late page of this request dropped at arrival, never counted for a later
// request.
func fetch(ctx context.Context, r *job.Rank, c config, prefillAddr fabric.Address, q request) (timeline, error) {
	lease, err := r.Engine.LeaseImms(c.Layers)
	if err != nil {
		return timeline{}, err
	}
	defer func() { _ = lease.Retire() }()
	if q.Mailbox, err = lease.Mailbox(); err != nil {
		return timeline{}, err
	}
	q.Imm = lease.First()
	arrived := make([]time.Time, c.Layers) // all of layer l's pages are here
	pending := atomic.Int32{}
	pending.Store(int32(c.Layers))
	all := make(chan struct{})
	for l := range c.Layers {
		// The callback runs on the engine's dispatcher once every page of
		// layer l has delivered its immediate; returning false drops the
		// counter.
		_, _, err := r.Engine.ExpectImm(lease.First()+uint32(l), uint32(len(q.Table)), func() bool {
			arrived[l] = time.Now()
			if pending.Add(-1) == 0 {
				close(all)
			}
			return false
		})
		if err != nil {
			return timeline{}, err
		}
	}
	msg, err := q.marshal()
	if err != nil {
		return timeline{}, err
	}
	start := time.Now()
	sent := fabric.NewTransfer()
	if err := r.Engine.Send(ctx, prefillAddr, msg, fabric.Notify(sent)); err != nil {
		return timeline{}, err
	}
	if err := sent.Wait(ctx); err != nil {
		return timeline{}, err
	}
	select {
	case <-all:
	case <-ctx.Done():
		return timeline{}, fmt.Errorf("waiting for the KV pages: %w", ctx.Err())
	}
	n, err := lease.WaitNotification(ctx)
	if err != nil {
		return timeline{}, fmt.Errorf("waiting for the prefill's notification: %w", err)
	}
	if len(n.Payload) != 12 || binary.LittleEndian.Uint32(n.Payload) != q.ID {
		return timeline{}, fmt.Errorf("notification %x is not request %d's", n.Payload, q.ID)
	}
	return newTimeline(q, c, start, arrived), nil
}
