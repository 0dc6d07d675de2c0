package tests

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
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

// A dead peer costs only its own transfers: one writer floods two target
// processes; one is SIGKILLed. Its transfers must end with a PeerError
// naming it within the liveness deadline, and the writes to the survivor
// go on without a single error, its bytes verified at the end.

// target is a target process started with the unreg-target role.
type target struct {
	cmd   *testutil.Child
	stdin interface{ Write([]byte) (int, error) }
	desc  fabric.Descriptor
}

func startTarget(t *testing.T, p params) *target {
	cmd := testutil.Spawn(t, "unreg-target", testutil.SpawnOptions{Stdin: true, Lines: true,
		Env: []string{"FERRY_TEST_TRANSPORT=" + p.transport, "FERRY_TEST_NODE=" + p.node, "FERRY_TEST_NICS=1"}})
	tg := &target{cmd: cmd, stdin: cmd.Stdin}
	db, err := hex.DecodeString(strings.TrimSpace(tg.next(t, "DESC ")))
	require.NoError(t, err)
	require.NoError(t, tg.desc.UnmarshalBinary(db))
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

func TestKillOneOfTwoTargets(t *testing.T) {
	for _, tr := range []struct{ transport, node string }{{"ipc", ""}, {"tcp;ofi_rxm", "127.0.0.1"}, {"shm", ""}} {
		t.Run(tr.transport, func(t *testing.T) {
			killOneOfTwo(t, params{transport: tr.transport, node: tr.node, nics: 1})
		})
	}
}

func killOneOfTwo(t *testing.T, p params) {
	fabrictest.RequireTransport(t, p.transport, p.config().Node)
	cfg := p.config()
	e, err := fabric.Open(context.Background(), cfg)
	require.NoError(t, err)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Logf("writer close: %v", err)
		}
	}()
	src, err := fabric.AllocHost(unregBuf)
	require.NoError(t, err)
	defer src.Free()
	for i, b := 0, src.Bytes(); i < len(b); i++ {
		b[i] = pattern(7, i)
	}
	sr, err := e.RegisterHost(src, fabric.AccessLocal)
	require.NoError(t, err)
	victim, survivor := startTarget(t, p), startTarget(t, p)

	const chunk = 64 << 10
	liveness := 10 * time.Second // generous: the liveness checks run every 500 ms
	type tally struct {
		ok, failed atomic.Int64
		mu         sync.Mutex
		errs       []error
	}
	var tallies [2]tally
	var stop atomic.Bool
	var wg sync.WaitGroup
	flood := func(k int, desc fabric.Descriptor) {
		defer wg.Done()
		sem := make(chan struct{}, 128)
		var pending sync.WaitGroup
		for i := 0; !stop.Load(); i++ {
			sem <- struct{}{}
			pending.Add(1)
			off := uint64(i%(unregBuf/chunk)) * chunk
			c := fabric.OnDone(func(err error) {
				defer pending.Done()
				<-sem
				if err == nil {
					tallies[k].ok.Add(1)
					return
				}
				tallies[k].failed.Add(1)
				tallies[k].mu.Lock()
				tallies[k].errs = append(tallies[k].errs, err)
				tallies[k].mu.Unlock()
			}).WithDeadline(time.Now().Add(liveness))
			if err := e.SubmitSingle(fabric.SingleWrite{Src: sr, SrcOffset: off, Length: chunk, Dst: desc, DstOffset: off}, c); err != nil {
				pending.Done()
				<-sem
				tallies[k].failed.Add(1)
				tallies[k].mu.Lock()
				tallies[k].errs = append(tallies[k].errs, err)
				tallies[k].mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		}
		pending.Wait()
	}
	wg.Add(2)
	go flood(0, victim.desc)
	go flood(1, survivor.desc)
	for tallies[0].ok.Load() < 300 || tallies[1].ok.Load() < 300 {
		time.Sleep(10 * time.Millisecond)
	}
	victim.cmd.Kill()
	killed := time.Now()
	// The victim's transfers end with a PeerError naming it.
	for tallies[0].failed.Load() == 0 {
		require.Less(t, time.Since(killed), liveness+5*time.Second, "no failure for the killed target")
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("%s: first failure for the killed target after %v", p.transport, time.Since(killed).Round(time.Millisecond))
	okAtKill := tallies[1].ok.Load()
	time.Sleep(2 * time.Second)
	stop.Store(true)
	wg.Wait()
	t.Logf("%s: survivor %d writes ok (%d after the kill), %d failed; victim %d ok, %d failed",
		p.transport, tallies[1].ok.Load(), tallies[1].ok.Load()-okAtKill, tallies[1].failed.Load(), tallies[0].ok.Load(), tallies[0].failed.Load())
	tallies[0].mu.Lock()
	var pe *fabric.PeerError
	require.ErrorAs(t, tallies[0].errs[0], &pe, "the killed target's first failure: %v", tallies[0].errs[0])
	require.Equal(t, victim.desc.NICs[0].Addr, pe.Peer, "the PeerError names the killed target")
	for _, err := range tallies[0].errs {
		require.True(t, errors.Is(err, fabric.ErrPeerLost), "killed target's transfer: %v", err)
	}
	tallies[0].mu.Unlock()
	tallies[1].mu.Lock()
	require.Empty(t, tallies[1].errs, "the survivor's transfers failed")
	tallies[1].mu.Unlock()
	require.Greater(t, tallies[1].ok.Load()-okAtKill, int64(100), "writes to the survivor kept flowing")

	// Verify the survivor's bytes: one last write of the whole buffer,
	// then the target checks every byte.
	tr := fabric.NewTransfer()
	require.NoError(t, e.SubmitSingle(fabric.SingleWrite{Src: sr, Length: unregBuf, Dst: survivor.desc}, fabric.Notify(tr)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, tr.Wait(ctx))
	_, err = fmt.Fprintln(survivor.stdin, "check 7")
	require.NoError(t, err)
	require.Equal(t, "ok", survivor.next(t, "CHECK "))
	_, err = fmt.Fprintln(survivor.stdin, "quit")
	require.NoError(t, err)
	require.NoError(t, survivor.cmd.Wait())
}
