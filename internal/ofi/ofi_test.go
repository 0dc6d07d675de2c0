//go:build cgo

package ofi

import (
	"errors"
	"strings"
	"testing"

	"github.com/ferryrdma/ferry/internal/testutil"
)

func TestVersion(t *testing.T) {
	v, api := Version(), APIVersion()
	if !strings.HasPrefix(v, "1.") || !strings.HasPrefix(api, "1.") {
		t.Fatalf("Version %q, APIVersion %q", v, api)
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
