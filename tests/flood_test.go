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

// What the scenarios that flood target processes share: the target
// processes (the unreg-target role), the flood itself, and the two
// things done to a target under it: killing it (killOneUnderFlood) and
// unregistering its region (unregisterUnderFlood). Writes and reads run
// the same scenarios; only what one transfer of the flood is differs.

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

// target is a target process started with the unreg-target role.
type target struct {
	cmd   *testutil.Child
	stdin interface{ Write([]byte) (int, error) }
	desc  fabric.Descriptor
}

// startTarget starts an unreg-target and reads its region's descriptor.
// A readable target's region is registered for remote reads too and
// holds pattern 7 once startTarget returns.
func startTarget(t *testing.T, p params, readable bool) *target {
	env := []string{"FERRY_TEST_TRANSPORT=" + p.transport, "FERRY_TEST_NODE=" + p.node, "FERRY_TEST_NICS=1"}
	if readable {
		env = append(env, readableEnv+"=1")
	}
	cmd := testutil.Spawn(t, "unreg-target", testutil.SpawnOptions{Stdin: true, Lines: true, Env: env})
	tg := &target{cmd: cmd, stdin: cmd.Stdin}
	db, err := hex.DecodeString(strings.TrimSpace(tg.next(t, "DESC ")))
	require.NoError(t, err)
	require.NoError(t, tg.desc.UnmarshalBinary(db))
	if readable {
		// The target fills its region once its descriptor is out: it
		// says so.
		_, err = fmt.Fprintln(tg.stdin, "fill 7")
		require.NoError(t, err)
		tg.next(t, "FILLED")
	}
	return tg
}

// next returns the rest of the target's next line starting with prefix,
// logging the lines before it.
func (tg *target) next(t *testing.T, prefix string) string {
	t.Helper()
	for {
		l := tg.cmd.ReadLine(60 * time.Second)
		if rest, found := strings.CutPrefix(l, prefix); found {
			return rest
		}
		t.Logf("target: %s", l)
	}
}

// quit tells the target to exit and checks it exited cleanly, having
// printed no malformed line.
func (tg *target) quit(t *testing.T) {
	t.Helper()
	_, err := fmt.Fprintln(tg.stdin, "quit")
	require.NoError(t, err)
	for l := range tg.cmd.Lines {
		t.Logf("target: %s", l)
		require.NotContains(t, l, "%!")
	}
	require.NoError(t, tg.cmd.Wait(), "the target process failed")
}

// openFlooder opens the engine that floods the targets, with a local
// region of unregBuf bytes to write from or read into; the test's
// cleanup closes and frees them.
func openFlooder(t *testing.T, p params) (*fabric.Engine, *fabric.HostBuffer, *fabric.MemoryRegion) {
	fabrictest.RequireTransport(t, p.transport, p.config().Node)
	e, err := fabric.Open(context.Background(), p.config())
	require.NoError(t, err)
	buf, err := fabric.AllocHost(unregBuf)
	require.NoError(t, err)
	t.Cleanup(func() {
		// shm may keep transfers of a gone region or peer: the close
		// gives up on them at this deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Logf("flooder close: %v", err)
		}
		_ = buf.Free()
	})
	reg, err := e.RegisterHost(buf, fabric.AccessLocal)
	require.NoError(t, err)
	return e, buf, reg
}

// submitFunc submits the flood's transfer number i with the completion c.
type submitFunc func(i uint64, c fabric.Completion) error

// writeChunks writes chunk-sized pieces of src to the same offsets of
// desc, cycling over unregBuf.
func writeChunks(e *fabric.Engine, src *fabric.MemoryRegion, desc fabric.Descriptor, chunk uint64) submitFunc {
	return func(i uint64, c fabric.Completion) error {
		off := i % (unregBuf / chunk) * chunk
		return e.SubmitSingle(fabric.SingleWrite{Src: src, SrcOffset: off, Length: chunk, Dst: desc, DstOffset: off}, c)
	}
}

// readChunks reads chunk-sized pieces of desc, cycling over it, into dst
// from base on, each into one of slots slots (slots*chunk bytes of dst).
func readChunks(e *fabric.Engine, dst *fabric.MemoryRegion, base uint64, slots uint64, desc fabric.Descriptor, chunk uint64) submitFunc {
	span := desc.Length / chunk
	return func(i uint64, c fabric.Completion) error {
		return e.SubmitRead(fabric.SingleRead{Dst: dst, DstOffset: base + (i%slots)*chunk, Length: chunk,
			Src: desc, SrcOffset: (i % span) * chunk}, c)
	}
}

// flood counts the transfers of one flood and keeps their errors, in the
// order they failed.
type flood struct {
	ok, failed atomic.Int64
	maxSubmit  atomic.Int64 // the longest submit, in nanoseconds

	mu   sync.Mutex
	errs []error
}

// run submits transfers until stop, at most slots in flight, each with
// the deadline, and waits for them all.
func (f *flood) run(stop *atomic.Bool, slots int, deadline time.Duration, submit submitFunc) {
	sem := make(chan struct{}, slots)
	var pending sync.WaitGroup
	for i := uint64(0); !stop.Load(); i++ {
		sem <- struct{}{}
		pending.Add(1)
		c := fabric.OnDone(func(err error) {
			defer pending.Done()
			defer func() { <-sem }()
			if err == nil {
				f.ok.Add(1)
				return
			}
			f.fail(err)
		}).WithDeadline(time.Now().Add(deadline))
		start := time.Now()
		err := submit(i, c)
		if d := int64(time.Since(start)); d > f.maxSubmit.Load() {
			f.maxSubmit.Store(d)
		}
		if err != nil {
			// Refused at submit: the completion is not called.
			pending.Done()
			<-sem
			f.fail(err)
			time.Sleep(time.Millisecond)
		}
	}
	pending.Wait()
}

func (f *flood) fail(err error) {
	f.failed.Add(1)
	f.mu.Lock()
	f.errs = append(f.errs, err)
	f.mu.Unlock()
}

func (f *flood) errors() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]error(nil), f.errs...)
}

func (f *flood) longestSubmit() time.Duration { return time.Duration(f.maxSubmit.Load()) }

// killLiveness is how long a killed peer's transfers may take to fail,
// their deadline: generous, the liveness checks run every 500 ms.
const killLiveness = 10 * time.Second

// killOneUnderFlood floods two targets with the transfers submit makes
// for each (what names them in messages: "write", "read"), kills victim
// under the flood and checks that a dead peer costs only its own
// transfers: they end with a PeerError naming it within the liveness
// deadline, and the survivor's go on without a single error. It returns
// the two floods (victim's first) for the caller's further checks;
// checking the survivor's bytes is the caller's too.
func killOneUnderFlood(t *testing.T, transport, what string, victim, survivor *target, slots int,
	submit func(tg *target) submitFunc) *[2]flood {
	var floods [2]flood
	var stop atomic.Bool
	t.Cleanup(func() { stop.Store(true) }) // a failed check must not leave the floods running
	var wg sync.WaitGroup
	for k, tg := range []*target{victim, survivor} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			floods[k].run(&stop, slots, killLiveness, submit(tg))
		}()
	}
	for floods[0].ok.Load() < 300 || floods[1].ok.Load() < 300 {
		if floods[0].failed.Load()+floods[1].failed.Load() != 0 {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("a %s failed before the kill: %v", what, append(floods[0].errors(), floods[1].errors()...))
		}
		time.Sleep(10 * time.Millisecond)
	}
	victim.cmd.Kill()
	killed := time.Now()
	for floods[0].failed.Load() == 0 {
		require.Less(t, time.Since(killed), killLiveness+5*time.Second, "no failure for the killed target")
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("%s: first failed %s with the killed target after %v", transport, what, time.Since(killed).Round(time.Millisecond))
	okAtKill := floods[1].ok.Load()
	time.Sleep(2 * time.Second)
	stop.Store(true)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(killLiveness + 20*time.Second):
		t.Fatalf("%ss still pending long past their deadline", what)
	}
	t.Logf("%s: survivor %d %ss ok (%d after the kill), %d failed; victim %d ok, %d failed; longest submit %v",
		transport, floods[1].ok.Load(), what, floods[1].ok.Load()-okAtKill, floods[1].failed.Load(),
		floods[0].ok.Load(), floods[0].failed.Load(), max(floods[0].longestSubmit(), floods[1].longestSubmit()).Round(time.Millisecond))
	verrs := floods[0].errors()
	var pe *fabric.PeerError
	require.ErrorAs(t, verrs[0], &pe, "the killed target's first failure: %v", verrs[0])
	require.Equal(t, victim.desc.NICs[0].Addr, pe.Peer, "the PeerError names the killed target")
	for _, err := range verrs {
		require.ErrorIs(t, err, fabric.ErrPeerLost, "a %s with the killed target", what)
	}
	require.Empty(t, floods[1].errors(), "the survivor's %ss failed", what)
	require.Greater(t, floods[1].ok.Load()-okAtKill, int64(100), "%ss with the survivor kept flowing", what)
	return &floods
}

// unregisterUnderFlood floods tg with the transfers of submit (at most
// slots in flight, each with a 3 s deadline), has the target unregister
// its region under the flood, then overwrite and free its memory. What
// must hold on every transport: every transfer ends well within its
// deadline, succeeded or failed with a typed error, and no submit blocks
// past it. Only ipc knows the region is gone and says so
// (ErrUnknownRegion), and then fails later transfers of it without
// posting them; what tcp and shm do is logged (see the callers). It ends
// the target.
func unregisterUnderFlood(t *testing.T, transport, what string, e *fabric.Engine, tg *target, slots int, submit submitFunc) {
	const deadline = 3 * time.Second
	var f flood
	var stop atomic.Bool
	t.Cleanup(func() { stop.Store(true) }) // a failed check must not leave the flood running
	flooded := make(chan struct{})
	go func() { defer close(flooded); f.run(&stop, slots, deadline, submit) }()
	for f.ok.Load() < 500 {
		if f.failed.Load() != 0 {
			stop.Store(true)
			<-flooded
			t.Fatalf("a %s failed before the unregister: %v", what, f.errors())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err := fmt.Fprintln(tg.stdin, "unregister")
	require.NoError(t, err)
	t.Logf("target: UNREG %s", tg.next(t, "UNREG "))
	tg.next(t, "REUSED")
	// Keep flooding a while after the unregister, then stop.
	time.Sleep(time.Second)
	stop.Store(true)
	select {
	case <-flooded:
	case <-time.After(deadline + 20*time.Second):
		t.Fatalf("%ss still pending long past their deadline: %d ok, %d failed", what, f.ok.Load(), f.failed.Load())
	}
	errs := f.errors()
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
	t.Logf("%s: %d %ss succeeded, %d failed; first failure: %v; longest submit %v", transport, f.ok.Load(), what,
		f.failed.Load(), first, f.longestSubmit().Round(time.Millisecond))
	require.Empty(t, untyped, "failures without a typed error")
	require.Less(t, f.longestSubmit(), deadline, "a submit blocked past the deadline")

	// A later transfer of the descriptor.
	posted := e.Stats().Domains[0].Posted
	tr := fabric.NewTransfer()
	start := time.Now()
	require.NoError(t, submit(0, fabric.Notify(tr).WithDeadline(time.Now().Add(deadline))))
	lerr := tr.Wait(context.Background())
	t.Logf("%s: a later %s: %v after %v", transport, what, lerr, time.Since(start).Round(time.Millisecond))
	if transport == "ipc" {
		require.ErrorIs(t, first, fabric.ErrUnknownRegion, "ipc says the region is gone")
		require.ErrorIs(t, lerr, fabric.ErrUnknownRegion)
		require.Equal(t, posted, e.Stats().Domains[0].Posted, "the later %s was not posted", what)
	}
	tg.quit(t)
}
