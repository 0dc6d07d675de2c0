package dl_test

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/ferryrdma/ferry/internal/dl"
)

// libc is on every machine the tests run on; cgoEnabled is false in a
// CGO_ENABLED=0 build, where every open must fail instead.
const libc = "libc.so.6"

func TestOpenMissingKeepsDlerror(t *testing.T) {
	l := dl.New(dl.Now, "libferry-does-not-exist.so.1", "/nonexistent/dir/libx.so")
	err := l.Open()
	if err == nil {
		t.Fatal("open of a missing library succeeded")
	}
	if !errors.Is(err, dl.ErrNotSupported) {
		t.Fatalf("error %v does not wrap ErrNotSupported", err)
	}
	var de *dl.Error
	if !errors.As(err, &de) || de.Op != "open" {
		t.Fatalf("error %#v is not an open *dl.Error", err)
	}
	// Both candidates are reported, each with the loader's own reason.
	for _, want := range []string{"libferry-does-not-exist.so.1", "/nonexistent/dir/libx.so"} {
		if !strings.Contains(de.Msg, want) {
			t.Errorf("message %q lacks candidate %q", de.Msg, want)
		}
	}
	if cgoEnabled && !strings.Contains(de.Msg, "No such file") {
		t.Errorf("message %q lacks the dlerror text", de.Msg)
	}
	if l.Refs() != 0 || l.Path() != "" {
		t.Fatalf("failed open left refs=%d path=%q", l.Refs(), l.Path())
	}
}

func TestNoCandidates(t *testing.T) {
	err := dl.New(dl.Now).Open()
	if !errors.Is(err, dl.ErrNotSupported) {
		t.Fatalf("got %v", err)
	}
}

func requireCgo(t *testing.T) {
	t.Helper()
	if !cgoEnabled {
		testutil.Skip(t, "cgo", "built with CGO_ENABLED=0: there is no dlopen to test")
	}
}

func TestOpenLookupRefcount(t *testing.T) {
	requireCgo(t)
	l := dl.New(dl.Now|dl.Local, "/nonexistent/libc.so.6", libc)
	if err := l.Open(); err != nil {
		t.Fatalf("open: %v", err)
	}
	if l.Path() != libc {
		t.Fatalf("path %q, want the second candidate", l.Path())
	}
	if err := l.Open(); err != nil {
		t.Fatalf("second open: %v", err)
	}
	if l.Refs() != 2 {
		t.Fatalf("refs %d", l.Refs())
	}
	if err := l.SetCandidates("other.so"); !errors.Is(err, dl.ErrBusy) {
		t.Fatalf("SetCandidates while open: %v", err)
	}
	p, err := l.Lookup("getpid")
	if err != nil || p == nil {
		t.Fatalf("lookup getpid: %p %v", p, err)
	}
	_, err = l.Lookup("ferry_no_such_symbol")
	if !errors.Is(err, dl.ErrNotSupported) || !strings.Contains(err.Error(), "ferry_no_such_symbol") {
		t.Fatalf("missing symbol: %v", err)
	}
	// Versioned entry points: the first name that resolves wins.
	_, got, err := l.LookupFirst("getpid_v9", "getpid")
	if err != nil || got != "getpid" {
		t.Fatalf("LookupFirst: %q %v", got, err)
	}
	_, _, err = l.LookupFirst("nope_v2", "nope")
	if !errors.Is(err, dl.ErrNotSupported) || !strings.Contains(err.Error(), "nope_v2") {
		t.Fatalf("LookupFirst missing: %v", err)
	}
	if err := l.Close(); err != nil || l.Refs() != 1 {
		t.Fatalf("close 1: %v refs %d", err, l.Refs())
	}
	if err := l.Close(); err != nil || l.Refs() != 0 {
		t.Fatalf("close 2: %v refs %d", err, l.Refs())
	}
	if err := l.Close(); err != nil {
		t.Fatalf("extra close: %v", err)
	}
	if _, err := l.Lookup("getpid"); !errors.Is(err, dl.ErrClosed) {
		t.Fatalf("lookup after close: %v", err)
	}
	if err := l.SetCandidates("x.so"); err != nil {
		t.Fatalf("SetCandidates while closed: %v", err)
	}
	if c := l.Candidates(); len(c) != 1 || c[0] != "x.so" {
		t.Fatalf("candidates %v", c)
	}
}

func TestConcurrentOpenClose(t *testing.T) {
	requireCgo(t)
	l := dl.New(dl.Lazy, libc)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if err := l.Open(); err != nil {
					t.Error(err)
					return
				}
				if _, err := l.Lookup("strlen"); err != nil {
					t.Error(err)
				}
				if err := l.Close(); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if l.Refs() != 0 {
		t.Fatalf("refs %d after balanced open/close", l.Refs())
	}
}

func TestGroupFailuresKeepsDistinctReasons(t *testing.T) {
	requireCgo(t)
	// A file that exists but is not a shared library fails differently
	// from missing files, and must not be lost among them.
	bad := t.TempDir() + "/libbad.so"
	if err := os.WriteFile(bad, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := dl.New(dl.Now, "/nonexistent/a.so", bad, "/nonexistent/b.so").Open()
	msg := err.Error()
	if !strings.Contains(msg, "(/nonexistent/a.so, /nonexistent/b.so)") {
		t.Errorf("missing files not grouped: %s", msg)
	}
	if !strings.Contains(msg, bad) || strings.Count(msg, ";") != 1 {
		t.Errorf("bad library reason not kept apart: %s", msg)
	}
}
