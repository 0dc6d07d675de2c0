//go:build cgo

package efa_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/efa"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/fabrictest"
	"github.com/ferryrdma/ferry/fabric/rdma"
)

// TestGenerationLibrary: an engine on libfabric names the library loaded
// and the API version ferry asks it for, and under make's LIBFABRIC=2.1
// (FERRY_LIBFABRIC) that library is the one asked for, not the system's.
func TestGenerationLibrary(t *testing.T) {
	fabrictest.RequireTransport(t, "shm", "")
	e, err := fabric.Open(context.Background(), fabric.Config{Transport: "shm"})
	require.NoError(t, err)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.Close(ctx))
	}()
	lib := e.Info().Library
	require.Equal(t, rdma.LibraryInfo{Name: "libfabric", Version: efa.Version(), API: efa.APIVersion()}, lib)
	require.NotEmpty(t, lib.Version)
	require.NotEmpty(t, lib.API)
	if want := os.Getenv("FERRY_LIBFABRIC"); want != "" {
		require.Equal(t, want, lib.Version, "the libfabric make was asked for (LIBFABRIC=%s)", want)
	}
	t.Logf("libfabric %s, API %s", lib.Version, lib.API)
}

// TestGenerationEFANoDevice: the efa provider of either generation, on a
// machine without an EFA device, answers with a typed "no device" error
// (the project-built 2.1 includes it; Debian's 1.17 has none), and never
// crashes.
func TestGenerationEFANoDevice(t *testing.T) {
	infos, err := efa.Domains("efa", rdma.DomainOptions{})
	if err == nil {
		t.Skipf("this machine has %d EFA domain(s): nothing to check", len(infos))
	}
	require.ErrorIs(t, err, rdma.ErrNotSupported)
	require.Contains(t, err.Error(), "no device")
	t.Log(err)
}
