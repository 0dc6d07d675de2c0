//go:build cgo

package ofi

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/ferryrdma/ferry/internal/testutil"
)

// TestVersion checks the library loaded is the one this test run was
// built for: FERRY_LIBFABRIC (make's LIBFABRIC=1.17|2.1) names the
// generation, so a 2.1 run that silently loaded the system's 1.17 (or the
// reverse) fails here instead of passing as the other.
func TestVersion(t *testing.T) {
	v, api := Version(), APIVersion()
	if !strings.HasPrefix(v, "1.") && !strings.HasPrefix(v, "2.") {
		t.Fatalf("Version %q", v)
	}
	if want := os.Getenv("FERRY_LIBFABRIC"); want != "" && v != want {
		t.Fatalf("libfabric %s loaded, FERRY_LIBFABRIC=%s: check PKG_CONFIG_PATH and the binary's rpath (or LD_LIBRARY_PATH)", v, want)
	}
	if api != Current().API.String() {
		t.Fatalf("APIVersion %q, generation's API %s", api, Current().API)
	}
	t.Logf("libfabric %s, API %s", v, api)
}

func TestErrno(t *testing.T) {
	if s := EAGAIN.Error(); s == "" || strings.HasPrefix(s, "fi errno") {
		t.Errorf("EAGAIN text %q", s)
	}
	var err error = Errno(ENODATA)
	if !errors.Is(err, ENODATA) {
		t.Error("errors.Is on Errno")
	}
}

func TestGetInfoUnknownProvider(t *testing.T) {
	_, err := GetInfo("no-such-provider", "", CapMsg|CapRMA, 0, 0)
	if !errors.Is(err, ENODATA) {
		t.Fatalf("GetInfo(unknown) = %v, want ENODATA", err)
	}
}

// TestOpenShm opens and closes an shm endpoint through the thin API:
// name, address vector insert of itself, registration.
func TestOpenShm(t *testing.T) {
	l, err := GetInfo("shm", "", CapMsg|CapRMA, MRLocal|MRVirtAddr|MRAllocated|MRProvKey, 0)
	if errors.Is(err, ENODATA) {
		testutil.Skip(t, "libfabric", "libfabric's shm provider is not on this machine")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer l.Free()
	infos := l.Infos()
	if len(infos) == 0 {
		t.Fatal("no infos")
	}
	ep, err := Open(infos[0], 0, false, "ferry-ofi-test")
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Close()
	name, err := ep.Name()
	if err != nil || !strings.HasPrefix(string(name), "ferry-ofi-test") {
		t.Fatalf("Name() = %q, %v", name, err)
	}
	if _, err := ep.AVInsert(name); err != nil {
		t.Fatal(err)
	}
	if _, err := ep.AVInsert(nil); !errors.Is(err, EINVAL) {
		t.Errorf("AVInsert(nil) = %v", err)
	}
	if ep.Info().ProvName() != "shm" || ep.Info().Dump() == "" {
		t.Errorf("info %q", ep.Info().ProvName())
	}
	if err := ep.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ep.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
}
