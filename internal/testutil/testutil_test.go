package testutil

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/errdefs"
)

// fakeTB records what a helper did to a test.
type fakeTB struct {
	testing.TB
	skipped, failed bool
	msg             string
	cleanups        []func()
	logMu           sync.Mutex // children's output arrives from other goroutines
	logs            []string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skipped, f.msg = true, fmt.Sprintf(format, args...)
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
}

func TestRequired(t *testing.T) {
	t.Setenv(RequireEnv, "cuda, verbs")
	if !Required("cuda") || !Required("verbs") || Required("nvrtc") {
		t.Fatal("list not parsed")
	}
	t.Setenv(RequireEnv, "all")
	if !Required("anything") {
		t.Fatal(`"all" not honoured`)
	}
}

func TestSkipIfNotSupported(t *testing.T) {
	wrapped := fmt.Errorf("no driver: %w", errdefs.ErrNotSupported)
	for _, tc := range []struct {
		name, require string
		err           error
		skip, fail    bool
	}{
		{"nil", "", nil, false, false},
		{"wrapped", "", wrapped, true, false},
		{"wrapped required", "cuda", wrapped, false, true},
		{"bare sentinel", "", errdefs.ErrNotSupported, false, true},
		{"other error", "", fmt.Errorf("boom"), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(RequireEnv, tc.require)
			f := &fakeTB{}
			SkipIfNotSupported(f, "cuda", tc.err)
			if f.skipped != tc.skip || f.failed != tc.fail {
				t.Fatalf("skipped %v failed %v (%q), want %v %v", f.skipped, f.failed, f.msg, tc.skip, tc.fail)
			}
		})
	}
}

func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Errorf(format string, args ...any) {
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
}

func (f *fakeTB) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func TestLeakCheck(t *testing.T) {
	defer func(d time.Duration) { leakWait = d }(leakWait)
	leakWait = 200 * time.Millisecond
	// A goroutine that outlives the checked test is reported.
	stop := make(chan struct{})
	f := &fakeTB{}
	LeakCheck(f)
	go func() { <-stop }()
	f.runCleanups()
	close(stop)
	if !f.failed {
		t.Fatal("LeakCheck did not report a goroutine that outlived its test")
	}
	// One that ends before the cleanup is not.
	done := make(chan struct{})
	g := &fakeTB{}
	LeakCheck(g)
	go func() { close(done) }()
	<-done
	g.runCleanups()
	if g.failed {
		t.Fatalf("LeakCheck reported a finished goroutine: %s", g.msg)
	}
}
