package tests

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/fabrictest"
)

// Unregister during a flood, across processes: a target process
// unregisters the region another process floods with writes. What must
// hold on every transport: the target's Unregister returns (nil, or a
// typed error); its own later submits from that region fail at once with
// ErrUnknownRegion; its memory can be written and freed afterwards; every
// write of the flood ends (succeeded, or failed with a typed error) well
// within its deadline, and no submit blocks past it.

const unregBuf = 8 << 20

// runUnregTarget is the target: it prints its region's descriptor, then
// follows the commands on stdin.
func runUnregTarget() error {
	p := paramsFromEnv()
	e, err := fabric.Open(context.Background(), p.config())
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			fmt.Printf("CLOSE %v\n", err)
		}
	}()
	buf, err := fabric.AllocHost(unregBuf)
	if err != nil {
		return err
	}
	r, err := e.RegisterHost(buf, targetAccess())
	if err != nil {
		return err
	}
	desc, err := r.Descriptor()
	if err != nil {
		return err
	}
	db, err := desc.MarshalBinary()
	if err != nil {
		return err
	}
	fmt.Printf("DESC %s\n", hex.EncodeToString(db))
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "unregister":
			start := time.Now()
			uerr := e.Unregister(r)
			fmt.Printf("UNREG %v in %v\n", uerr, time.Since(start).Round(time.Millisecond))
			if uerr != nil && !errors.Is(uerr, fabric.ErrProvider) && !errors.Is(uerr, fabric.ErrTimeout) {
				return fmt.Errorf("unregister: untyped error: %w", uerr)
			}
			// Its own submits from the region fail at once.
			serr := e.SubmitSingle(fabric.SingleWrite{Src: r, Length: 8, Dst: desc}, fabric.Notify(fabric.NewTransfer()))
			if !errors.Is(serr, fabric.ErrUnknownRegion) {
				return fmt.Errorf("submit from the unregistered region: %v, want ErrUnknownRegion", serr)
			}
			// The memory is the program's again.
			b := buf.Bytes()
			for i := range b {
				b[i] = 0xA5
			}
			if err := buf.Free(); err != nil {
				return fmt.Errorf("free after unregister: %w", err)
			}
			fmt.Println("REUSED")
		case "fill 7":
			for i := range buf.Bytes() {
				buf.Bytes()[i] = pattern(7, i)
			}
			fmt.Println("FILLED")
		case "check 7":
			// Every byte as the writer's source has it (pattern 7).
			res := "ok"
			for i, b := range buf.Bytes() {
				if b != pattern(7, i) {
					res = fmt.Sprintf("byte %d is %#x, want %#x", i, b, pattern(7, i))
					break
				}
			}
			fmt.Printf("CHECK %s\n", res)
		case "quit":
			return nil
		}
	}
	return nil
}

func TestUnregisterDuringFlood(t *testing.T) {
	for _, tr := range []struct{ transport, node string }{{"shm", ""}, {"ipc", ""}, {"tcp;ofi_rxm", "127.0.0.1"}} {
		t.Run(tr.transport, func(t *testing.T) {
			unregisterDuringFlood(t, params{transport: tr.transport, node: tr.node, nics: 1})
		})
	}
}

func unregisterDuringFlood(t *testing.T, p params) {
	fabrictest.RequireTransport(t, p.transport, p.config().Node)
	e, err := fabric.Open(context.Background(), p.config())
	require.NoError(t, err)
	defer func() {
		// shm keeps the unattributed writes: the close gives up on them
		// at this deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Logf("writer close: %v", err)
		}
	}()
	src, err := fabric.AllocHost(unregBuf)
	require.NoError(t, err)
	defer src.Free()
	sr, err := e.RegisterHost(src, fabric.AccessLocal)
	require.NoError(t, err)

	tg := startTarget(t, p)
	desc, stdin, next := tg.desc, tg.stdin, func(prefix string) string { return tg.next(t, prefix) }
	lines, cmd := tg.cmd.Lines, tg.cmd

	// The flood: 64 KiB writes, at most 256 in flight, each with a 3 s
	// deadline (libfabric's shm either copies them itself, checking no
	// key, and fails those into unmapped memory with error completions
	// that name no operation, or its target drops them unanswered: either
	// way they end at their deadline, ErrTimeout; efa/doc.go).
	const chunk = 64 << 10
	const deadline = 3 * time.Second
	var (
		inflight  = make(chan struct{}, 256)
		wg        sync.WaitGroup
		ok, fails atomic.Int64
		firstMu   sync.Mutex
		first     error
		untyped   []error
		maxSubmit atomic.Int64
		stop      atomic.Bool
	)
	flood := make(chan struct{})
	go func() {
		defer close(flood)
		for i := 0; !stop.Load(); i++ {
			inflight <- struct{}{}
			wg.Add(1)
			c := fabric.OnDone(func(err error) {
				defer wg.Done()
				<-inflight
				if err == nil {
					ok.Add(1)
					return
				}
				fails.Add(1)
				firstMu.Lock()
				if first == nil {
					first = err
				}
				if !errors.Is(err, fabric.ErrProvider) && !errors.Is(err, fabric.ErrUnknownRegion) &&
					!errors.Is(err, fabric.ErrPeerLost) && !errors.Is(err, fabric.ErrTimeout) {
					untyped = append(untyped, err)
				}
				firstMu.Unlock()
			}).WithDeadline(time.Now().Add(deadline))
			off := uint64(i%(unregBuf/chunk)) * chunk
			start := time.Now()
			err := e.SubmitSingle(fabric.SingleWrite{Src: sr, SrcOffset: off, Length: chunk, Dst: desc, DstOffset: off}, c)
			if d := time.Since(start); int64(d) > maxSubmit.Load() {
				maxSubmit.Store(int64(d))
			}
			if err != nil {
				// Refused at submit: the completion is not called.
				wg.Done()
				<-inflight
				fails.Add(1)
				firstMu.Lock()
				if first == nil {
					first = err
				}
				firstMu.Unlock()
				time.Sleep(time.Millisecond)
			}
		}
	}()
	// Let the flood run, then unregister under it.
	for ok.Load() < 500 {
		time.Sleep(10 * time.Millisecond)
		require.Zero(t, fails.Load(), "a write failed before the unregister")
	}
	_, err = fmt.Fprintln(stdin, "unregister")
	require.NoError(t, err)
	t.Logf("target: UNREG %s", next("UNREG "))
	next("REUSED")
	// Keep flooding a while after the unregister, then stop.
	time.Sleep(time.Second)
	stop.Store(true)
	<-flood
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(deadline + 20*time.Second):
		t.Fatalf("writes still pending long past their deadline: %d ok, %d failed", ok.Load(), fails.Load())
	}
	firstMu.Lock()
	defer firstMu.Unlock()
	t.Logf("%s: %d writes succeeded, %d failed; first failure: %v; longest submit %v", p.transport, ok.Load(), fails.Load(),
		first, time.Duration(maxSubmit.Load()).Round(time.Millisecond))
	require.Empty(t, untyped, "failures without a typed error")
	require.Less(t, time.Duration(maxSubmit.Load()), deadline, "a submit blocked past the deadline")
	// A later write to the descriptor. ipc names the cause (the key was
	// revoked: ErrUnknownRegion) and the writer then fails such writes at
	// once, without posting them.
	posted := e.Stats().Domains[0].Posted
	tr := fabric.NewTransfer()
	start := time.Now()
	require.NoError(t, e.SubmitSingle(fabric.SingleWrite{Src: sr, Length: chunk, Dst: desc},
		fabric.Notify(tr).WithDeadline(time.Now().Add(deadline))))
	lerr := tr.Wait(context.Background())
	t.Logf("%s: a later write: %v after %v", p.transport, lerr, time.Since(start).Round(time.Millisecond))
	// tcp;ofi_rxm may have connected again by then (the peer was lost, not
	// for good), and a write into an unknown key can then complete there
	// successfully (tcp completes once sent; its target drops the write and
	// the connection again); shm's later writes can complete too (its
	// cross-memory copy checks no key) or end at their deadline (README,
	// efa/doc.go "Unregistered regions"): only ipc knows the region is gone.
	if p.transport == "ipc" {
		require.ErrorIs(t, first, fabric.ErrUnknownRegion, "ipc says the region is gone")
		require.ErrorIs(t, lerr, fabric.ErrUnknownRegion)
		require.Equal(t, posted, e.Stats().Domains[0].Posted, "the later write was not posted")
	}
	_, err = fmt.Fprintln(stdin, "quit")
	require.NoError(t, err)
	for l := range lines {
		t.Logf("target: %s", l)
		require.NotContains(t, l, "%!")
	}
	require.NoError(t, cmd.Wait(), "the target process failed")
}
