package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/cuda/emu"
	"github.com/ferryrdma/ferry/fabric"
)

// TestCodesMatchHeader: the Go constants and ferry.h's FERRY_E_* macros
// are the same list with the same values.
func TestCodesMatchHeader(t *testing.T) {
	h, err := os.ReadFile("ferry.h")
	require.NoError(t, err)
	got := map[string]int{}
	for _, m := range regexp.MustCompile(`#define (FERRY_(?:OK|E_[A-Z_]+))\s+\(?(-?\d+)\)?`).FindAllStringSubmatch(string(h), -1) {
		v, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		got[m[1]] = v
	}
	want := map[string]int{
		"FERRY_OK": codeOK, "FERRY_E_INVALID": codeInvalid, "FERRY_E_CLOSED": codeClosed,
		"FERRY_E_UNKNOWN_REGION": codeUnknownRegion, "FERRY_E_OUT_OF_BOUNDS": codeOutOfBounds,
		"FERRY_E_NOT_SUPPORTED": codeNotSupported, "FERRY_E_TIMEOUT": codeTimeout,
		"FERRY_E_PROVIDER": codeProvider, "FERRY_E_NIC_MISMATCH": codeNICMismatch,
		"FERRY_E_BAD_ENCODING": codeBadEncoding, "FERRY_E_NO_TRANSPORT": codeNoTransport,
		"FERRY_E_UNKNOWN_PROVIDER": codeUnknownProv, "FERRY_E_BUSY": codeBusy,
		"FERRY_E_TOO_LARGE": codeTooLarge, "FERRY_E_REMOVED": codeRemoved,
		"FERRY_E_BAD_HANDLE": codeBadHandle, "FERRY_E_BUFFER_TOO_SMALL": codeBufferTooSmall,
		"FERRY_E_RENDEZVOUS": codeRendezvous, "FERRY_E_PEER_LOST": codePeerLost,
		"FERRY_E_QUEUE_FULL": codeQueueFull, "FERRY_E_ABANDONED": codeAbandoned,
		"FERRY_E_NO_MEMORY": codeNoMemory, "FERRY_E_INTERNAL": codeInternal,
		"FERRY_E_CALL_ORDER": codeCallOrder, "FERRY_E_BROKEN": codeBroken, "FERRY_E_EXPERT_OVERFLOW": codeExpertOverflow,
		"FERRY_E_NOT_FOUND": codeNotFound, "FERRY_E_EXISTS": codeExists, "FERRY_E_UNAVAILABLE": codeUnavailable,
		"FERRY_E_STALE_DESCRIPTOR": codeStale,
		"FERRY_E_NOT_LEASED":       codeNotLeased, "FERRY_E_NOTIFY_TOO_LARGE": codeNotifyTooLarge,
		"FERRY_E_LEASES_EXHAUSTED":   codeLeasesOut,
		"FERRY_E_NOT_READABLE":       codeNotReadable,
		"FERRY_E_NOTIFICATIONS_LOST": codeNotificationsLost,
	}
	require.Equal(t, want, got)
}

// TestCodeOf: every sentinel maps to its code through any wrapping, and
// a protocol deadline reported by a provider is a timeout.
func TestCodeOf(t *testing.T) {
	require.Equal(t, codeOK, codeOf(nil))
	for _, c := range codes {
		wrapped := fmt.Errorf("outer: %w", &fabric.RequestError{Op: "x", Msg: "y", Err: c.err})
		require.Equal(t, c.code, codeOf(wrapped), "%v", c.err)
	}
	require.Equal(t, codeProvider, codeOf(&fabric.ProviderError{Op: "fi_writemsg", Errno: 5}))
	require.Equal(t, codeTimeout, codeOf(&fabric.ProviderError{Op: "connect", Timeout: true}))
	require.Equal(t, codePeerLost, codeOf(&fabric.ProviderError{Op: "connect", Timeout: true, PeerLost: true}),
		"a peer that stopped answering is lost, not just late")
	require.Equal(t, codeInternal, codeOf(errors.New("mmap: cannot allocate memory")))

	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	require.Equal(t, codeTimeout, codeOf(fabric.NewTransfer().Wait(ctx)), "a wait's deadline")
	var c fabric.TransferCounter
	require.Equal(t, codeTimeout, codeOf(c.Wait(ctx, 1)), "a counter wait's deadline")
}

// TestHandleTable: handles are unique, typed and single-use.
func TestHandleTable(t *testing.T) {
	var tab handleTable
	tr := fabric.NewTransfer()
	h := tab.add(tr)
	require.NotZero(t, h)
	h2 := tab.add(new(fabric.TransferCounter))
	require.NotEqual(t, h, h2)

	got, err := lookup[*fabric.Transfer](&tab, h, "transfer")
	require.NoError(t, err)
	require.Same(t, tr, got)
	_, err = lookup[*fabric.Transfer](&tab, h2, "transfer")
	require.ErrorIs(t, err, errBadHandle, "wrong kind")
	_, err = lookup[*fabric.Transfer](&tab, 0, "transfer")
	require.ErrorIs(t, err, errBadHandle, "zero")

	_, err = release[*fabric.TransferCounter](&tab, h, "counter")
	require.ErrorIs(t, err, errBadHandle, "release of the wrong kind")
	_, err = release[*fabric.Transfer](&tab, h, "transfer")
	require.NoError(t, err)
	_, err = release[*fabric.Transfer](&tab, h, "transfer")
	require.ErrorIs(t, err, errBadHandle, "second release")
	_, err = lookup[*fabric.Transfer](&tab, h, "transfer")
	require.ErrorIs(t, err, errBadHandle, "released")
	require.Equal(t, 1, tab.len())

	// A released handle is never issued again.
	require.Greater(t, tab.add(tr), h2)
}

// TestEmulatorWithoutCompiler: the cuda-emu backend's error when
// FERRY_EMU_CXX names no compiler reaches C as FERRY_E_NOT_SUPPORTED,
// with a message that names the compiler it looked for.
func TestEmulatorWithoutCompiler(t *testing.T) {
	missing := t.TempDir() + "/no-such-g++"
	t.Setenv("FERRY_EMU_CXX", missing)
	_, err := emu.Build(context.Background(), emu.BuildSpec{
		Sources: []cuda.Source{{Name: "k.cu", Code: `extern "C" __global__ void k(int *p) { p[0] = 1; }`}}})
	require.Error(t, err)
	err = fmt.Errorf("a2a create: %w", err)
	require.Equal(t, codeNotSupported, codeOf(err), "%v", err)
	require.Contains(t, err.Error(), missing)
}
