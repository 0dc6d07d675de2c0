package emu_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/cuda/emu"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// Scopes as the scenario kernels take them.
const (
	cta = 0
	gpu = 1
	sys = 2
)

var scopeNames = [...]string{"cta", "gpu", "sys"}

func scopeModule(tb testing.TB) *emu.Module {
	tb.Helper()
	if os.Getenv(emu.ScopeCheckEnv) == "0" {
		testutil.Skip(tb, "cudaemu", "the scope checker is off (%s=0)", emu.ScopeCheckEnv)
	}
	return testdataModule(tb, "scope_kernels.cu")
}

// wantScope checks a launch's outcome: nil when ok, else a KernelError
// from the scope checker whose message contains each of want.
func wantScope(t *testing.T, err error, ok bool, want ...string) {
	t.Helper()
	if ok {
		if err != nil {
			t.Fatalf("flagged a correct use of scopes: %v", err)
		}
		return
	}
	var ke *emu.KernelError
	if !errors.As(err, &ke) || !strings.HasPrefix(ke.Msg, "scope: ") {
		t.Fatalf("scope violation not reported: got %v", err)
	}
	for _, w := range want {
		if !strings.Contains(ke.Msg, w) {
			t.Fatalf("report lacks %q: %s", w, ke.Msg)
		}
	}
	t.Logf("reported: %s", ke.Msg)
}

// Between blocks of one launch, a flag needs gpu scope on both sides.
func TestScopeBetweenBlocks(t *testing.T) {
	m := scopeModule(t)
	cases := []struct {
		store, load int
		ok          bool
		want        []string
	}{
		{gpu, gpu, true, nil},
		{sys, sys, true, nil},
		{sys, gpu, true, nil},
		{gpu, cta, false, []string{"ld.acquire.cta", "st.release.gpu", "the load's scope", "need gpu scope"}},
		{cta, gpu, false, []string{"ld.acquire.gpu", "st.release.cta", "the store's scope", "need gpu scope"}},
		{cta, cta, false, []string{"need gpu scope"}},
	}
	for _, c := range cases {
		t.Run(scopeNames[c.store]+"-"+scopeNames[c.load], func(t *testing.T) {
			mem := alloc(t, 4096)
			s := newStream(t)
			if err := s.Launch(kernel(t, m, "scope_cross_block"), cuda.Dim3{X: 2}, cuda.Dim3{X: 32}, 0,
				mem.Ptr(0), mem.Ptr(64), int32(c.store), int32(c.load)); err != nil {
				t.Fatal(err)
			}
			wantScope(t, syncStream(t, s, time.Minute), c.ok, c.want...)
			if c.ok && mem.Uint32(17).Load() != 42 {
				t.Fatalf("data %d, want 42", mem.Uint32(17).Load())
			}
		})
	}
}

// Inside one block cta scope is enough.
func TestScopeInsideBlock(t *testing.T) {
	m := scopeModule(t)
	mem := alloc(t, 4096)
	s := newStream(t)
	if err := s.Launch(kernel(t, m, "scope_same_block"), cuda.Dim3{X: 1}, cuda.Dim3{X: 64}, 0,
		mem.Ptr(0), mem.Ptr(64), int32(cta), int32(cta)); err != nil {
		t.Fatal(err)
	}
	wantScope(t, syncStream(t, s, time.Minute), true)
	if mem.Uint32(17).Load() != 7 {
		t.Fatalf("data %d, want 7", mem.Uint32(17).Load())
	}
}

// waitStarted waits until the running scope_acquire has looked at its
// flag once.
func waitStarted(t *testing.T, mem *emu.Memory, word int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for mem.Uint32(word).Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("scope_acquire never started")
		}
		time.Sleep(time.Millisecond)
	}
}

// Between devices, both sides need sys scope.
func TestScopeBetweenDevices(t *testing.T) {
	m := scopeModule(t)
	cases := []struct {
		store, load int
		ok          bool
		want        []string
	}{
		{sys, sys, true, nil},
		{gpu, gpu, false, []string{"from device 2", "need sys scope"}},
		{sys, gpu, false, []string{"ld.acquire.gpu", "the load's scope", "need sys scope"}},
		{gpu, sys, false, []string{"st.release.gpu", "the store's scope", "need sys scope"}},
	}
	for _, c := range cases {
		t.Run(scopeNames[c.store]+"-"+scopeNames[c.load], func(t *testing.T) {
			mem := alloc(t, 4096)
			waiter, raiser := emu.NewDeviceStream(1), emu.NewDeviceStream(2)
			defer waiter.Close()
			defer raiser.Close()
			if err := waiter.Launch(kernel(t, m, "scope_acquire"), cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0,
				mem.Ptr(0), uint32(1), int32(c.load), mem.Ptr(64)); err != nil {
				t.Fatal(err)
			}
			waitStarted(t, mem, 16)
			if err := raiser.Launch(kernel(t, m, "scope_release"), cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0,
				mem.Ptr(0), uint32(1), int32(c.store)); err != nil {
				t.Fatal(err)
			}
			if err := syncStream(t, raiser, time.Minute); err != nil {
				t.Fatal(err)
			}
			wantScope(t, syncStream(t, waiter, time.Minute), c.ok, c.want...)
		})
	}
}

// A launch that ended before another began is ordered with it by the
// kernel boundary, whatever the scopes.
func TestScopeOrderedByLaunch(t *testing.T) {
	m := scopeModule(t)
	mem := alloc(t, 4096)
	first, second := emu.NewDeviceStream(1), emu.NewDeviceStream(2)
	defer first.Close()
	defer second.Close()
	if err := first.Launch(kernel(t, m, "scope_release"), cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0,
		mem.Ptr(0), uint32(5), int32(cta)); err != nil {
		t.Fatal(err)
	}
	if err := syncStream(t, first, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := second.Launch(kernel(t, m, "scope_acquire"), cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0,
		mem.Ptr(0), uint32(5), int32(cta), mem.Ptr(64)); err != nil {
		t.Fatal(err)
	}
	wantScope(t, syncStream(t, second, time.Minute), true)
}

// A flag the host raises while a kernel polls it needs a sys-scope load.
func TestScopeHostWrite(t *testing.T) {
	m := scopeModule(t)
	for _, c := range []struct {
		load int
		ok   bool
	}{{sys, true}, {gpu, false}, {cta, false}} {
		t.Run(scopeNames[c.load], func(t *testing.T) {
			mem := alloc(t, 4096)
			s := newStream(t)
			if err := s.Launch(kernel(t, m, "scope_acquire"), cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0,
				mem.Ptr(0), uint32(1), int32(c.load), mem.Ptr(64)); err != nil {
				t.Fatal(err)
			}
			waitStarted(t, mem, 16)
			mem.Uint32(0).Store(1)
			wantScope(t, syncStream(t, s, time.Minute), c.ok, "ld.acquire."+scopeNames[c.load],
				"no scoped store of an emulated device wrote", "needs a sys-scope load")
		})
	}
}

// Atomics on one counter from two devices need sys scope too.
func TestScopeAtomicsBetweenDevices(t *testing.T) {
	m := scopeModule(t)
	for _, c := range []struct {
		sc int
		ok bool
	}{{sys, true}, {gpu, false}} {
		t.Run(scopeNames[c.sc], func(t *testing.T) {
			mem := alloc(t, 4096)
			a, b := emu.NewDeviceStream(1), emu.NewDeviceStream(2)
			defer a.Close()
			defer b.Close()
			for _, s := range []*emu.Stream{a, b} {
				if err := s.Launch(kernel(t, m, "scope_count"), cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0,
					mem.Ptr(0), int32(c.sc), uint32(2)); err != nil {
					t.Fatal(err)
				}
			}
			errA, errB := syncStream(t, a, time.Minute), syncStream(t, b, time.Minute)
			if c.ok {
				wantScope(t, errors.Join(errA, errB), true)
				return
			}
			// Whichever added second observed the other's gpu-scope add.
			if errA == nil && errB == nil {
				t.Fatal("gpu-scope atomics of two devices on one counter not reported")
			}
			wantScope(t, errors.Join(errA, errB), false, "atom.relaxed.gpu", "need sys scope")
		})
	}
}
