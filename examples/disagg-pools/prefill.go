package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/directory"
)

// prefillWorkers is how many requests one prefill engine streams at once.
const prefillWorkers = 4

// errCrashed is the end of a prefill the demo killed.
var errCrashed = errors.New("crashed")

// runPrefill serves requests until ctx ends, then withdraws its entry in
// order. crash (the demo's simulated SIGKILL; nil otherwise) stops it
// without withdrawing anything, as a killed process would.
func runPrefill(ctx context.Context, o options, d directory.Directory, out io.Writer, crash <-chan struct{}) error {
	// The memory outlives the engine (deferred calls run last first).
	chunkBytes := o.chunkKiB << 10
	src, err := fabric.AllocHost(prefillWorkers * chunkBytes)
	if err != nil {
		return err
	}
	defer src.Free()
	eng, err := openEngine(ctx, o.provider)
	if err != nil {
		return err
	}
	closeEngine := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = eng.Close(cctx)
	}
	defer closeEngine()

	srcRegion, err := eng.RegisterHost(src, fabric.AccessLocal)
	if err != nil {
		return err
	}

	entry, err := directory.EntryOf(eng, o.name, map[string]string{"role": "prefill"})
	if err != nil {
		return err
	}
	pub, err := d.Publish(ctx, entry)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "prefill %s: published (%s, %s)\n", o.name, o.provider, eng.MainAddress())

	// Requests arrive on the dispatcher thread, which must not block:
	// they queue for the workers.
	queue := make(chan request, 1024)
	err = eng.BouncingRecvs(64, 256, func(b []byte) {
		r, err := decodeRequest(b)
		if err != nil {
			fmt.Fprintf(out, "prefill %s: %v\n", o.name, err)
			return
		}
		select {
		case queue <- r:
		default:
			fmt.Fprintf(out, "prefill %s: queue full, request %d dropped\n", o.name, r.ID)
		}
	}, nil)
	if err != nil {
		return err
	}

	regions := &regionCache{d: d, m: make(map[string]fabric.Descriptor)}
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w := range prefillWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case r := <-queue:
					if err := stream(wctx, o, eng, srcRegion, src.Bytes(), uint64(w*chunkBytes), regions, r, out); err != nil && wctx.Err() == nil {
						fmt.Fprintf(out, "prefill %s: request %d: %v\n", o.name, r.ID, err)
					}
				case <-wctx.Done():
					return
				}
			}
		}()
	}
	select {
	case <-ctx.Done():
	case <-crash:
	}
	stopWorkers()
	wg.Wait()
	select {
	case <-crash:
		// Killed: the entry stays until its lease runs out (or, in the
		// demo, until the in-process directory is told it expired).
		closeEngine()
		return errCrashed
	default:
	}
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = pub.Close(cctx)
	fmt.Fprintf(out, "prefill %s: closed\n", o.name)
	return err
}

// stream computes request r chunk by chunk and writes each chunk into the
// decode's region as soon as it is ready, from the worker's own slice of
// src (at off).
func stream(ctx context.Context, o options, eng *fabric.Engine, srcRegion *fabric.MemoryRegion, src []byte, off uint64,
	regions *regionCache, r request, out io.Writer) error {
	if int(r.ChunkBytes) > o.chunkKiB<<10 || r.Chunks == 0 {
		return fmt.Errorf("chunks of %d bytes (at most %d), %d chunks: refused", r.ChunkBytes, o.chunkKiB<<10, r.Chunks)
	}
	dst, err := regions.get(ctx, r.Decode)
	if err != nil {
		return err
	}
	t := fabric.NewTransfer()
	buf := src[off : off+uint64(r.ChunkBytes)]
	for c := range r.Chunks {
		fill(buf, r.ID, c)
		// The compute this chunk stands for: the next chunk's compute
		// overlaps this chunk's transfer in a real prefill; here the
		// write waits, so the order of the output lines is simple.
		select {
		case <-time.After(o.chunkDur):
		case <-ctx.Done():
			return ctx.Err()
		}
		w := fabric.SingleWrite{Src: srcRegion, SrcOffset: off, Length: uint64(r.ChunkBytes), Dst: dst,
			DstOffset: (uint64(r.Slot)*uint64(r.Chunks) + uint64(c)) * uint64(r.ChunkBytes), Imm: fabric.Immediate(r.Imm)}
		if err := eng.SubmitSingle(w, fabric.Notify(t)); err != nil {
			return err
		}
		if err := t.Wait(ctx); err != nil {
			return err
		}
		fmt.Fprintf(out, "prefill %s: request %d chunk %d/%d\n", o.name, r.ID, c+1, r.Chunks)
	}
	return nil
}

// regionCache looks decode engines' "kv" regions up in the directory once.
type regionCache struct {
	d  directory.Directory
	mu sync.Mutex
	m  map[string]fabric.Descriptor
}

func (c *regionCache) get(ctx context.Context, decode string) (fabric.Descriptor, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.m[decode]; ok {
		return d, nil
	}
	r, err := c.d.Region(ctx, decode, "kv")
	if err != nil {
		return fabric.Descriptor{}, err
	}
	c.m[decode] = r.Desc
	return r.Desc, nil
}
