package tests

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/fabrictest"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// Reads across processes, when the peer read from goes away: a reader
// floods reads from target processes (the unreg-target role, its region
// readable and filled with pattern 7) and one target is SIGKILLed, or
// unregisters its region, under the flood. Every read must end (no hang:
// each has a deadline, and none may reach it on a killed peer), with a
// typed error; a killed peer's reads fail with a PeerError naming it,
// the other target's reads go on without an error and their bytes are
// checked.

// readableEnv makes the unreg-target role register its region readable
// and fill it with pattern 7 (see targetAccess).
const readableEnv = "FERRY_TEST_READABLE"

// targetAccess is what the unreg-target role registers its region with.
func targetAccess() fabric.Access {
	if os.Getenv(readableEnv) != "" {
		return fabric.AccessRemoteWrite | fabric.AccessRemoteRead
	}
	return fabric.AccessRemoteWrite
}

// startReadTarget starts an unreg-target whose region reads pattern 7.
func startReadTarget(t *testing.T, p params) *target {
	cmd := testutil.Spawn(t, "unreg-target", testutil.SpawnOptions{Stdin: true, Lines: true,
		Env: []string{"FERRY_TEST_TRANSPORT=" + p.transport, "FERRY_TEST_NODE=" + p.node, "FERRY_TEST_NICS=1",
			readableEnv + "=1"}})
	tg := &target{cmd: cmd, stdin: cmd.Stdin}
	db, err := hex.DecodeString(strings.TrimSpace(tg.next(t, "DESC ")))
	require.NoError(t, err)
	require.NoError(t, tg.desc.UnmarshalBinary(db))
	// The target fills its region once its descriptor is out: it says so.
	_, err = fmt.Fprintln(tg.stdin, "fill 7")
	require.NoError(t, err)
	tg.next(t, "FILLED")
	return tg
}

// readTally counts a flood's reads.
type readTally struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       []error
}

func (r *readTally) fail(err error) {
	r.failed.Add(1)
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

func (r *readTally) errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// readFlood reads chunk-sized ranges of desc into dst from base on (each
// read into its own slot, at most slots in flight: slots*chunk bytes)
// until stop, every read with the deadline, and waits for them all. It
// records the longest submit.
func readFlood(e *fabric.Engine, dst *fabric.MemoryRegion, base uint64, desc fabric.Descriptor, chunk uint64, deadline time.Duration,
	tally *readTally, stop *atomic.Bool, maxSubmit *atomic.Int64) {
	const slots = 64
	sem := make(chan struct{}, slots)
	var pending sync.WaitGroup
	span := desc.Length / chunk
	for i := uint64(0); !stop.Load(); i++ {
		sem <- struct{}{}
		pending.Add(1)
		c := fabric.OnDone(func(err error) {
			defer pending.Done()
			defer func() { <-sem }()
			if err == nil {
				tally.ok.Add(1)
				return
			}
			tally.fail(err)
		}).WithDeadline(time.Now().Add(deadline))
		start := time.Now()
		err := e.SubmitRead(fabric.SingleRead{Dst: dst, DstOffset: base + (i%slots)*chunk, Length: chunk,
			Src: desc, SrcOffset: (i % span) * chunk}, c)
		if d := int64(time.Since(start)); d > maxSubmit.Load() {
			maxSubmit.Store(d)
		}
		if err != nil {
			// Refused at submit: the completion is not called.
			pending.Done()
			<-sem
			tally.fail(err)
			time.Sleep(time.Millisecond)
		}
	}
	pending.Wait()
}

// readAll reads the whole of desc into dst and checks it holds pattern 7.
func readAll(t *testing.T, e *fabric.Engine, dst *fabric.MemoryRegion, buf *fabric.HostBuffer, desc fabric.Descriptor) {
	t.Helper()
	clear(buf.Bytes())
	tr := fabric.NewTransfer()
	require.NoError(t, e.SubmitRead(fabric.SingleRead{Dst: dst, Length: desc.Length, Src: desc}, fabric.Notify(tr)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, tr.Wait(ctx))
	for i, b := range buf.Bytes()[:desc.Length] {
		if b != pattern(7, i) {
			t.Fatalf("byte %d read is %#x, want %#x", i, b, pattern(7, i))
		}
	}
}

// openReader opens the reading engine and a local destination of
// unregBuf bytes.
func openReader(t *testing.T, p params) (*fabric.Engine, *fabric.HostBuffer, *fabric.MemoryRegion) {
	fabrictest.RequireTransport(t, p.transport, p.config().Node)
	e, err := fabric.Open(context.Background(), p.config())
	require.NoError(t, err)
	buf, err := fabric.AllocHost(unregBuf)
	require.NoError(t, err)
	t.Cleanup(func() {
		// shm may keep reads of a gone region: the close gives up on
		// them at this deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Logf("reader close: %v", err)
		}
		_ = buf.Free()
	})
	reg, err := e.RegisterHost(buf, fabric.AccessLocal)
	require.NoError(t, err)
	return e, buf, reg
}

var readTransports = []struct{ transport, node string }{{"ipc", ""}, {"tcp;ofi_rxm", "127.0.0.1"}, {"shm", ""}}

func TestReadPeerKilled(t *testing.T) {
	for _, tr := range readTransports {
		t.Run(tr.transport, func(t *testing.T) {
			readPeerKilled(t, params{transport: tr.transport, node: tr.node, nics: 1})
		})
	}
}

func readPeerKilled(t *testing.T, p params) {
	e, buf, dst := openReader(t, p)
	victim, survivor := startReadTarget(t, p), startReadTarget(t, p)
	readAll(t, e, dst, buf, victim.desc)

	const chunk = 64 << 10       // 64 slots of it: half of dst
	liveness := 10 * time.Second // generous: the liveness checks run every 500 ms
	var tallies [2]readTally
	var stop atomic.Bool
	var maxSubmit atomic.Int64
	var wg sync.WaitGroup
	// Two floods into separate halves of dst (64 slots of 64 KiB each).
	wg.Add(2)
	go func() {
		defer wg.Done()
		readFlood(e, dst, 0, victim.desc, chunk, liveness, &tallies[0], &stop, &maxSubmit)
	}()
	go func() {
		defer wg.Done()
		readFlood(e, dst, unregBuf/2, survivor.desc, chunk, liveness, &tallies[1], &stop, &maxSubmit)
	}()
	for tallies[0].ok.Load() < 300 || tallies[1].ok.Load() < 300 {
		require.Zero(t, tallies[0].failed.Load()+tallies[1].failed.Load(), "a read failed before the kill: %v",
			append(tallies[0].errors(), tallies[1].errors()...))
		time.Sleep(10 * time.Millisecond)
	}
	victim.cmd.Kill()
	killed := time.Now()
	for tallies[0].failed.Load() == 0 {
		require.Less(t, time.Since(killed), liveness+5*time.Second, "no failure for the killed target")
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("%s: first failure of a read from the killed target after %v", p.transport, time.Since(killed).Round(time.Millisecond))
	okAtKill := tallies[1].ok.Load()
	time.Sleep(2 * time.Second)
	stop.Store(true)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(liveness + 20*time.Second):
		t.Fatalf("reads still pending long past their deadline")
	}
	t.Logf("%s: survivor %d reads ok (%d after the kill), %d failed; victim %d ok, %d failed; longest submit %v",
		p.transport, tallies[1].ok.Load(), tallies[1].ok.Load()-okAtKill, tallies[1].failed.Load(),
		tallies[0].ok.Load(), tallies[0].failed.Load(), time.Duration(maxSubmit.Load()).Round(time.Millisecond))
	verrs := tallies[0].errors()
	var pe *fabric.PeerError
	require.ErrorAs(t, verrs[0], &pe, "the killed target's first failure: %v", verrs[0])
	require.Equal(t, victim.desc.NICs[0].Addr, pe.Peer, "the PeerError names the killed target")
	for _, err := range verrs {
		require.ErrorIs(t, err, fabric.ErrPeerLost, "a read from the killed target")
		require.NotErrorIs(t, err, fabric.ErrTimeout, "a read from the killed target waited for its deadline")
	}
	require.Empty(t, tallies[1].errors(), "reads from the survivor failed")
	require.Greater(t, tallies[1].ok.Load()-okAtKill, int64(100), "reads from the survivor kept flowing")
	require.Less(t, time.Duration(maxSubmit.Load()), liveness, "a submit blocked past the deadline")

	// The survivor's bytes, all of them, read after the kill.
	readAll(t, e, dst, buf, survivor.desc)
	_, err := fmt.Fprintln(survivor.stdin, "quit")
	require.NoError(t, err)
	require.NoError(t, survivor.cmd.Wait())
}

func TestUnregisterDuringReads(t *testing.T) {
	for _, tr := range readTransports {
		t.Run(tr.transport, func(t *testing.T) {
			unregisterDuringReads(t, params{transport: tr.transport, node: tr.node, nics: 1})
		})
	}
}

// unregisterDuringReads: the target unregisters the region under a read
// flood, then overwrites and frees its memory. What must hold on every
// transport: every read ends well within its deadline, succeeded or
// failed with a typed error, and no submit blocks past it. Only ipc knows
// the region is gone and says so (ErrUnknownRegion), and then fails later
// reads of it without posting them. libfabric's tcp and shm cannot tell
// the reader why, and the scenario accepts what they do (logged): tcp's
// target drops the connection (the reads in flight fail with ErrPeerLost,
// later ones with a provider error once it reconnects); shm's copy out of
// the unmapped memory fails with a completion that names no operation, so
// those reads end at their deadline (ErrTimeout), as later reads of the
// region do, and the reader's close abandons their operations.
func unregisterDuringReads(t *testing.T, p params) {
	e, buf, dst := openReader(t, p)
	tg := startReadTarget(t, p)
	readAll(t, e, dst, buf, tg.desc)

	const chunk = 64 << 10
	const deadline = 3 * time.Second
	var tally readTally
	var stop atomic.Bool
	var maxSubmit atomic.Int64
	flood := make(chan struct{})
	go func() { defer close(flood); readFlood(e, dst, 0, tg.desc, chunk, deadline, &tally, &stop, &maxSubmit) }()
	for tally.ok.Load() < 500 {
		require.Zero(t, tally.failed.Load(), "a read failed before the unregister: %v", tally.errors())
		time.Sleep(10 * time.Millisecond)
	}
	_, err := fmt.Fprintln(tg.stdin, "unregister")
	require.NoError(t, err)
	t.Logf("target: UNREG %s", tg.next(t, "UNREG "))
	tg.next(t, "REUSED")
	time.Sleep(time.Second)
	stop.Store(true)
	select {
	case <-flood:
	case <-time.After(deadline + 20*time.Second):
		t.Fatalf("reads still pending long past their deadline: %d ok, %d failed", tally.ok.Load(), tally.failed.Load())
	}
	errs := tally.errors()
	var untyped []error
	for _, err := range errs {
		if !errors.Is(err, fabric.ErrProvider) && !errors.Is(err, fabric.ErrUnknownRegion) &&
			!errors.Is(err, fabric.ErrPeerLost) && !errors.Is(err, fabric.ErrTimeout) {
			untyped = append(untyped, err)
		}
	}
	var first error
	if len(errs) > 0 {
		first = errs[0]
	}
	t.Logf("%s: %d reads succeeded, %d failed; first failure: %v; longest submit %v", p.transport, tally.ok.Load(),
		tally.failed.Load(), first, time.Duration(maxSubmit.Load()).Round(time.Millisecond))
	require.Empty(t, untyped, "failures without a typed error")
	require.Less(t, time.Duration(maxSubmit.Load()), deadline, "a submit blocked past the deadline")

	// A later read of the descriptor.
	posted := e.Stats().Domains[0].Posted
	tr := fabric.NewTransfer()
	start := time.Now()
	require.NoError(t, e.SubmitRead(fabric.SingleRead{Dst: dst, Length: chunk, Src: tg.desc},
		fabric.Notify(tr).WithDeadline(time.Now().Add(deadline))))
	lerr := tr.Wait(context.Background())
	t.Logf("%s: a later read: %v after %v", p.transport, lerr, time.Since(start).Round(time.Millisecond))
	if p.transport == "ipc" {
		require.ErrorIs(t, first, fabric.ErrUnknownRegion, "ipc says the region is gone")
		require.ErrorIs(t, lerr, fabric.ErrUnknownRegion)
		require.Equal(t, posted, e.Stats().Domains[0].Posted, "the later read was not posted")
	}
	_, err = fmt.Fprintln(tg.stdin, "quit")
	require.NoError(t, err)
	for l := range tg.cmd.Lines {
		t.Logf("target: %s", l)
		require.NotContains(t, l, "%!")
	}
	require.NoError(t, tg.cmd.Wait(), "the target process failed")
}
