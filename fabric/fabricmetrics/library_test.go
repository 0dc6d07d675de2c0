package fabricmetrics

import (
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// libSource is a Source whose provider names a native library.
type libSource struct{ lib fabric.LibraryInfo }

func (s libSource) Stats() fabric.Stats { return fabric.Stats{} }
func (s libSource) Info() fabric.Info {
	return fabric.Info{Provider: "libfabric", Transport: "shm", Library: s.lib}
}

// TestLibraryInfo: ferry_library_info names the library, the version
// loaded and the API version asked for, and is absent for providers that
// name none (mem).
func TestLibraryInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(New(libSource{lib: fabric.LibraryInfo{Name: "libfabric", Version: "2.1", API: "2.1"}}, Options{}))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	fams := scrape(t, srv.URL)
	require.Equal(t, 1.0, sum(t, fams, "ferry_library_info", map[string]string{"library": "libfabric", "version": "2.1", "api": "2.1"}))
	require.Len(t, fams["ferry_library_info"].GetMetric(), 1)

	reg = prometheus.NewRegistry()
	reg.MustRegister(New(openMem(t, 1), Options{}))
	srv2 := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv2.Close()
	fams = scrape(t, srv2.URL)
	require.NotContains(t, fams, "ferry_library_info", "mem runs on no native library")
	require.Contains(t, fams, "ferry_engine_info")
}
