package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/errdefs"
)

func TestMain(m *testing.M) {
	Main(m, Roles{
		"ok": func() error {
			fmt.Println("to stdout")
			fmt.Fprint(os.Stderr, "to stderr, no newline")
			return nil
		},
		"fail": func() error {
			fmt.Fprintln(os.Stderr, "about to fail")
			return errors.New("boom")
		},
		"status3": func() error { return Exit(3) },
		"hang": func() error {
			fmt.Println("hanging")
			time.Sleep(time.Hour)
			return nil
		},
		"echo": func() error {
			sc := bufio.NewScanner(os.Stdin)
			for sc.Scan() {
				fmt.Println("echo " + sc.Text())
			}
			return sc.Err()
		},
		"term": func() error {
			stop := make(chan os.Signal, 1)
			signal.Notify(stop, syscall.SIGTERM)
			fmt.Println("ready")
			<-stop
			return nil
		},
	})
}

func (f *fakeTB) Logf(format string, args ...any) {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Fatal(args ...any) { f.failed, f.msg = true, fmt.Sprint(args...) }

func (f *fakeTB) log() string {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	return strings.Join(f.logs, "\n")
}

func TestRunLogsOutput(t *testing.T) {
	f := &fakeTB{}
	Run(f, "ok", SpawnOptions{})
	f.runCleanups()
	if f.failed {
		t.Fatalf("a role that exits 0 failed its parent: %s", f.msg)
	}
	for _, want := range []string{"ok: to stdout", "ok: to stderr, no newline"} {
		if !strings.Contains(f.log(), want) {
			t.Errorf("test log lacks %q:\n%s", want, f.log())
		}
	}
}

func TestFailingRoleFailsParent(t *testing.T) {
	// Spawned and left to the cleanup: it reports the status.
	f := &fakeTB{}
	c := Spawn(f, "fail", SpawnOptions{})
	<-c.Done()
	f.runCleanups()
	if !f.failed || !strings.Contains(f.msg, "exit status 1") {
		t.Fatalf("failed %v (%q), want a failure naming exit status 1", f.failed, f.msg)
	}
	if !strings.Contains(f.log(), "fail: about to fail") || !strings.Contains(f.log(), "fail: boom") {
		t.Fatalf("the child's stderr is not in the test log:\n%s", f.log())
	}
	// Run fails at once.
	g := &fakeTB{}
	Run(g, "fail", SpawnOptions{})
	if !g.failed {
		t.Fatal("Run of a failing role did not fail the test")
	}
	g.runCleanups()
}

func TestExitStatusAndUnknownRole(t *testing.T) {
	for role, want := range map[string]int{"status3": 3, "no-such-role": 2} {
		err := Spawn(t, role, SpawnOptions{}).Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != want {
			t.Errorf("%s: %v, want exit status %d", role, err, want)
		}
	}
}

func TestHungChildKilledAtDeadline(t *testing.T) {
	f := &fakeTB{}
	start := time.Now()
	c := Spawn(f, "hang", SpawnOptions{Timeout: 300 * time.Millisecond})
	select {
	case <-c.Done():
	case <-time.After(time.Minute):
		t.Fatal("a hung child outlived its deadline by a minute")
	}
	t.Logf("killed %v after its start", time.Since(start).Round(time.Millisecond))
	f.runCleanups()
	if !f.failed || !strings.Contains(f.msg, "deadline") {
		t.Fatalf("failed %v (%q), want a failure naming the deadline", f.failed, f.msg)
	}
	if !strings.Contains(f.log(), "hang: hanging") {
		t.Fatalf("output before the kill is not in the log:\n%s", f.log())
	}
}

func TestKilledChildIsNoFailure(t *testing.T) {
	f := &fakeTB{}
	c := Spawn(f, "hang", SpawnOptions{})
	c.Kill()
	<-c.Done()
	// One still running at the end is killed by the cleanup, no failure
	// either.
	Spawn(f, "hang", SpawnOptions{})
	f.runCleanups()
	if f.failed {
		t.Fatalf("a child killed on purpose failed the test: %s", f.msg)
	}
}

func TestStdinAndLines(t *testing.T) {
	c := Spawn(t, "echo", SpawnOptions{Stdin: true, Lines: true})
	for _, w := range []string{"one", "two"} {
		if _, err := fmt.Fprintln(c.Stdin, w); err != nil {
			t.Fatal(err)
		}
		if l := c.ReadLine(time.Minute); l != "echo "+w {
			t.Fatalf("got %q, want %q", l, "echo "+w)
		}
	}
	if err := c.Stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-c.Lines; ok {
		t.Fatal("Lines not closed after the child exited")
	}
}

func TestStopSignalStatusCounts(t *testing.T) {
	f := &fakeTB{}
	c := Spawn(f, "term", SpawnOptions{Stop: syscall.SIGTERM, Lines: true})
	if l := c.ReadLine(time.Minute); l != "ready" {
		t.Fatalf("child said %q", l)
	}
	f.runCleanups()
	if f.failed {
		t.Fatalf("a child that exits 0 on its stop signal failed the test: %s", f.msg)
	}
	// A child that a stop signal ends with a failure status is reported.
	g := &fakeTB{}
	c = Spawn(g, "hang", SpawnOptions{Stop: syscall.SIGTERM, Lines: true})
	<-c.Lines
	g.runCleanups()
	if !g.failed {
		t.Fatal("a child killed by its stop signal did not fail the test")
	}
}

// TestRunTest re-runs itself: the child run sees the variable and checks
// what it must, failing its parent if that is wrong.
func TestRunTest(t *testing.T) {
	if v, ok := os.LookupEnv("TESTUTIL_RUNTEST_CHILD"); ok {
		if v != "yes" || os.Getenv(RoleEnv) != "" {
			t.Fatalf("child environment: %q, role %q", v, os.Getenv(RoleEnv))
		}
		t.Log("child ran")
		return
	}
	f := &fakeTB{}
	RunTest(f, "TestRunTest", SpawnOptions{Env: []string{"TESTUTIL_RUNTEST_CHILD=yes"}})
	f.runCleanups()
	if f.failed || !strings.Contains(f.log(), "child ran") {
		t.Fatalf("failed %v (%q), log:\n%s", f.failed, f.msg, f.log())
	}
	g := &fakeTB{}
	RunTest(g, "TestRunTest", SpawnOptions{Env: []string{"TESTUTIL_RUNTEST_CHILD=no"}})
	g.runCleanups()
	if !g.failed {
		t.Fatal("a child test that fails did not fail its parent")
	}
}

func TestRequireCUDA(t *testing.T) {
	noDriver := func() error { return fmt.Errorf("load driver: %w", errdefs.ErrNotSupported) }
	present := func() error { return nil }
	for _, tc := range []struct {
		name, require string
		probe         func() error
		open          func() (*fakeContext, error)
		skip, fail    bool
		closed        bool
	}{
		{"no driver", "", noDriver, nil, true, false, false},
		{"no driver, required", "cuda", noDriver, nil, false, true, false},
		{"open fails", "", present, func() (*fakeContext, error) { return nil, errors.New("out of memory") }, false, true, false},
		{"leak at close", "", present, func() (*fakeContext, error) { return &fakeContext{err: errors.New("busy")}, nil }, false, true, true},
		{"clean", "cuda", present, func() (*fakeContext, error) { return &fakeContext{}, nil }, false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(RequireEnv, tc.require)
			f := &fakeTB{}
			var c *fakeContext
			func() {
				defer func() {
					if r := recover(); r != nil && r != (stopped{}) {
						panic(r)
					}
				}()
				c = RequireCUDA(stoppingTB{f}, tc.probe, tc.open)
			}()
			f.runCleanups()
			if f.skipped != tc.skip || f.failed != tc.fail {
				t.Fatalf("skipped %v failed %v (%q), want %v %v", f.skipped, f.failed, f.msg, tc.skip, tc.fail)
			}
			if tc.closed && (c == nil || !c.closed) {
				t.Fatal("context not closed at cleanup")
			}
		})
	}
}

type fakeContext struct {
	closed bool
	err    error
}

func (c *fakeContext) Close() error { c.closed = true; return c.err }

// stoppingTB stops the helper under test at a skip or a fatal failure, as
// the testing package does, by a panic the test recovers.
type stoppingTB struct{ *fakeTB }

type stopped struct{}

func (s stoppingTB) Skipf(format string, args ...any) {
	s.fakeTB.Skipf(format, args...)
	panic(stopped{})
}

func (s stoppingTB) Fatalf(format string, args ...any) {
	s.fakeTB.Fatalf(format, args...)
	panic(stopped{})
}
