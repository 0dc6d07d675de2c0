package tests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// Reads across processes, when the peer read from goes away: a reader
// floods reads from target processes (the unreg-target role, its region
// readable and filled with pattern 7) and one target is SIGKILLed, or
// unregisters its region, under the flood. Every read must end (no hang:
// each has a deadline, and none may reach it on a killed peer), with a
// typed error; a killed peer's reads fail with a PeerError naming it,
// the other target's reads go on without an error and their bytes are
// checked.

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

var readTransports = []struct{ transport, node string }{{"ipc", ""}, {"tcp;ofi_rxm", "127.0.0.1"}, {"shm", ""}}

func TestReadPeerKilled(t *testing.T) {
	for _, tr := range readTransports {
		t.Run(tr.transport, func(t *testing.T) {
			readPeerKilled(t, params{transport: tr.transport, node: tr.node, nics: 1})
		})
	}
}

func readPeerKilled(t *testing.T, p params) {
	e, buf, dst := openFlooder(t, p)
	victim, survivor := startTarget(t, p, true), startTarget(t, p, true)
	readAll(t, e, dst, buf, victim.desc)

	// Two floods into separate halves of dst, 64 slots of 64 KiB each.
	const chunk, slots = 64 << 10, 64
	floods := killOneUnderFlood(t, p.transport, "read", victim, survivor, slots, func(tg *target) submitFunc {
		base := uint64(0)
		if tg == survivor {
			base = unregBuf / 2
		}
		return readChunks(e, dst, base, slots, tg.desc, chunk)
	})
	// A read of a killed peer ends when the peer is found lost, not at
	// its deadline, and no submit waits for one.
	for _, err := range floods[0].errors() {
		require.NotErrorIs(t, err, fabric.ErrTimeout, "a read from the killed target waited for its deadline")
	}
	for k := range floods {
		require.Less(t, floods[k].longestSubmit(), killLiveness, "a submit blocked past the deadline")
	}

	// The survivor's bytes, all of them, read after the kill.
	readAll(t, e, dst, buf, survivor.desc)
	survivor.quit(t)
}

func TestUnregisterDuringReads(t *testing.T) {
	for _, tr := range readTransports {
		t.Run(tr.transport, func(t *testing.T) {
			unregisterDuringReads(t, params{transport: tr.transport, node: tr.node, nics: 1})
		})
	}
}

// unregisterDuringReads: the target unregisters the region under a read
// flood, then overwrites and frees its memory (unregisterUnderFlood).
// libfabric's tcp and shm cannot tell the reader why, and the scenario
// accepts what they do (logged): tcp's target drops the connection (the
// reads in flight fail with ErrPeerLost, later ones with a provider error
// once it reconnects); shm's copy out of the unmapped memory fails with a
// completion that names no operation, so those reads end at their
// deadline (ErrTimeout), as later reads of the region do, and the
// reader's close abandons their operations.
func unregisterDuringReads(t *testing.T, p params) {
	e, buf, dst := openFlooder(t, p)
	tg := startTarget(t, p, true)
	readAll(t, e, dst, buf, tg.desc)
	const chunk, slots = 64 << 10, 64
	unregisterUnderFlood(t, p.transport, "read", e, tg, slots, readChunks(e, dst, 0, slots, tg.desc, chunk))
}
