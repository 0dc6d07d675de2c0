package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/job"
)

// poolCard is what the decode tells the prefill at startup: where its page
// pool is. Layer l's pool pages start at l*Blocks*pageBytes.
type poolCard struct {
	Pool   *fabric.Descriptor `json:"pool,omitempty"`
	Blocks int                `json:"blocks"`
}

// prefill serves requests until the decode says quit: it "computes" each
// layer's KV pages into its own registered buffer (laid out [layer][page])
// and writes them into the decode's pool with one paged write per layer.
func prefill(ctx context.Context, r *job.Rank, c config) error {
	card, err := job.Broadcast(ctx, r, 1, poolCard{})
	if err != nil {
		return fmt.Errorf("learn the decode's pool: %w", err)
	}
	if card.Pool == nil {
		return fmt.Errorf("the decode sent no pool descriptor: %w", fabric.ErrBadEncoding)
	}
	pb, blocks := c.pageBytes(), c.blocks()
	kv, err := r.Alloc(c.Layers*blocks*pb, fabric.AccessLocal)
	if err != nil {
		return err
	}
	// The side channel: requests arrive in engine buffers and are copied
	// out to this channel by the engine's dispatcher.
	msgs := make(chan []byte, 16)
	if err := r.Engine.BouncingRecvs(4, maxMessage, func(b []byte) { msgs <- b }, nil); err != nil {
		return err
	}
	// The prefill's pages of a layer are contiguous: source page j is j.
	srcPages := make([]uint32, blocks)
	for j := range srcPages {
		srcPages[j] = uint32(j)
	}
	var timings []prefillTiming
	for {
		var m []byte
		select {
		case m = <-msgs:
		case <-ctx.Done():
			return fmt.Errorf("waiting for a request: %w", ctx.Err())
		}
		if len(m) > 0 && m[0] == msgQuit {
			break
		}
		q, err := parseRequest(m)
		if err != nil {
			return err
		}
		if len(q.Table) != blocks {
			return fmt.Errorf("request %d has %d pages, want %d", q.ID, len(q.Table), blocks)
		}
		t, err := serve(ctx, r, c, kv, srcPages, card, q)
		if err != nil {
			return fmt.Errorf("request %d: %w", q.ID, err)
		}
		timings = append(timings, t)
	}
	return report(ctx, r, c, outcome{Prefill: timings})
}

// prefillTiming is one request as the prefill saw it.
type prefillTiming struct {
	// Compute is the whole forward pass.
	Compute time.Duration `json:"compute_ns"`
	// Transfer is the time at least one layer's write was in flight: the
	// union of each layer's submit-to-completion interval.
	Transfer time.Duration `json:"transfer_ns"`
}

// serve runs one prefill.
func serve(ctx context.Context, r *job.Rank, c config, kv *job.Buffer, srcPages []uint32, card poolCard, q request) (prefillTiming, error) {
	pb, blocks := c.pageBytes(), c.blocks()
	layerBytes := blocks * pb
	submitted := make([]time.Time, c.Layers)
	completed := make([]time.Time, c.Layers)
	done := make(chan error, c.Layers)
	// send writes layer l's pages into the pool pages the table names, one
	// immediate per page (the decode times each layer by them). Its
	// completion (on the engine's dispatcher) means the pages have left
	// this buffer; the decode learns that the whole request landed from
	// the notification sent after the last completion.
	send := func(l int) error {
		submitted[l] = time.Now()
		return r.Engine.SubmitPaged(fabric.PagedWrite{
			Src: kv.Region, SrcPages: srcPages, SrcStride: uint64(pb), SrcOffset: uint64(l * layerBytes),
			Dst: *card.Pool, DstPages: q.Table, DstStride: uint64(pb), DstOffset: uint64(l * card.Blocks * pb),
			Length: uint64(pb), Imm: fabric.Immediate(q.Imm + uint32(l)),
		}, fabric.OnDone(func(err error) {
			completed[l] = time.Now()
			done <- err
		}))
	}

	start := time.Now()
	for l := range c.Layers {
		// The simulated forward pass of layer l: produce its KV pages (real
		// work, so the bytes are checkable), then wait out the rest of the
		// layer's compute time, as a GPU would still be busy.
		layer := kv.Bytes()[l*layerBytes : (l+1)*layerBytes]
		for j := range blocks {
			fillPage(layer[j*pb:(j+1)*pb], c.Seed, q.ID, l, j)
		}
		time.Sleep(time.Until(start.Add(time.Duration(l+1) * c.LayerTime)))
		if q.Stream {
			if err := send(l); err != nil {
				return prefillTiming{}, fmt.Errorf("layer %d: %w", l, err)
			}
		}
	}
	t := prefillTiming{Compute: time.Since(start)}
	if !q.Stream {
		// Everything is computed: now write every layer.
		for l := range c.Layers {
			if err := send(l); err != nil {
				return prefillTiming{}, fmt.Errorf("layer %d: %w", l, err)
			}
		}
	}
	// The next request overwrites the KV buffer: wait until every write
	// has read it.
	for range c.Layers {
		select {
		case err := <-done:
			if err != nil {
				return prefillTiming{}, err
			}
		case <-ctx.Done():
			return prefillTiming{}, fmt.Errorf("writes: %w", ctx.Err())
		}
	}
	t.Transfer = union(submitted, completed)
	// Every layer's write completed: the notification reaches the decode
	// after all of them are visible there.
	sent := fabric.NewTransfer()
	if err := r.Engine.SubmitNotification(fabric.Notification{To: q.Mailbox, Payload: doneNote(q.ID, t.Compute)},
		fabric.Notify(sent)); err != nil {
		return prefillTiming{}, fmt.Errorf("notify: %w", err)
	}
	if err := sent.Wait(ctx); err != nil {
		return prefillTiming{}, fmt.Errorf("notify: %w", err)
	}
	return t, nil
}

// union measures the union of the intervals [from[i], to[i]].
func union(from, to []time.Time) time.Duration {
	idx := make([]int, len(from))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return from[a].Compare(from[b]) })
	var total time.Duration
	var end time.Time
	for _, i := range idx {
		if from[i].After(end) {
			end = from[i]
		}
		if to[i].After(end) {
			total += to[i].Sub(end)
			end = to[i]
		}
	}
	return total
}
