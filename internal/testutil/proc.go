package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Multi-process tests re-execute their own test binary in a role: the
// parent starts it with RoleEnv naming the role (Spawn, Run, or a rank
// job), and the package's TestMain, a call to Main, runs that role in
// place of the tests.

// RoleEnv names the role a re-executed test binary plays.
const RoleEnv = "FERRY_TEST_ROLE"

// Roles maps role names to what a child process playing them runs. A
// role's error is printed on stderr and makes the process exit 1, or the
// status an ExitStatus in it gives.
type Roles map[string]func() error

// ExitStatus is a role's exit status other than 0 or 1 (a role whose
// expected outcome the parent tells apart by status). Returned bare it
// prints nothing; wrapped, the message is printed too.
type ExitStatus int

func (s ExitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

// Exit turns a role body that returns an exit status into a role's
// error: nil for 0.
func Exit(code int) error {
	if code == 0 {
		return nil
	}
	return ExitStatus(code)
}

// Main is a package's TestMain: when the binary was started in a role it
// runs that role and exits with its status; otherwise it runs the tests,
// then each of after (package-wide cleanup), and exits with the tests'
// status.
func Main(m *testing.M, roles Roles, after ...func()) {
	if role := os.Getenv(RoleEnv); role != "" {
		os.Exit(playRole(role, roles[role]))
	}
	code := m.Run()
	for _, f := range after {
		f()
	}
	os.Exit(code)
}

// playRole runs role and returns the process's exit status.
func playRole(name string, role func() error) int {
	if role == nil {
		fmt.Fprintf(os.Stderr, "%s=%s: no such role in this test binary\n", RoleEnv, name)
		return 2
	}
	err := role()
	if err == nil {
		return 0
	}
	var st ExitStatus
	if errors.As(err, &st) {
		if err != error(st) {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		}
		return int(st)
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	return 1
}

// SelfArgv is the command line that re-executes this test binary without
// running any of its tests: what a role's process runs.
func SelfArgv() []string { return []string{os.Args[0], "-test.run=^$"} }

// RoleEnviron is this process's environment with role named and env
// added (later entries win). An empty role runs the tests, whatever role
// this process plays.
func RoleEnviron(role string, env ...string) []string {
	return append(append(os.Environ(), RoleEnv+"="+role), env...)
}

// SpawnOptions are a spawned role's settings; the zero value is a child
// with the parent's environment, its output in the test log, killed at
// the test's end.
type SpawnOptions struct {
	// Env is added to the parent's environment.
	Env []string
	// Stdin gives the child a pipe on its stdin (Child.Stdin), closed at
	// the test's end; without it the child reads nothing.
	Stdin bool
	// Lines sends the child's stdout lines to Child.Lines instead of the
	// test log; the test must read them (or the child blocks writing).
	Lines bool
	// Stderr, when set, receives each stderr line in place of the test
	// log (a test that checks or filters what its child says).
	Stderr func(line string)
	// Command builds the process (in a network namespace, say); the
	// default is exec.Command.
	Command func(name string, args ...string) *exec.Cmd
	// Timeout is the child's deadline, after which it is killed and
	// fails the test; the default is the test binary's deadline (-timeout)
	// or, without one, 10 minutes.
	Timeout time.Duration
	// Stop is the signal that ends a child still running at the test's
	// end: SIGKILL (the default) ends it without looking at its status;
	// another signal (SIGTERM for a server that must clean up) must make
	// it exit 0 within stopGrace.
	Stop syscall.Signal
	// IgnoreExit leaves the exit status to the test: a child expected to
	// fail on its own is not reported.
	IgnoreExit bool
}

// stopGrace bounds how long a child has to exit after the Stop signal.
var stopGrace = 30 * time.Second

// waitDelay bounds how long Wait waits for output after the child exits
// (a grandchild holding its pipes open).
const waitDelay = 5 * time.Second

// Child is a running role process of a test.
type Child struct {
	tb   testing.TB
	role string
	opts SpawnOptions
	cmd  *exec.Cmd
	// Stdin is the child's stdin when SpawnOptions.Stdin is set.
	Stdin io.WriteCloser
	// Lines carries the child's stdout lines when SpawnOptions.Lines is
	// set; it is closed when the child closes its stdout.
	Lines <-chan string

	lines          chan string
	stdout, stderr *lineWriter    // nil stdout with Lines
	readers        sync.WaitGroup // the goroutine feeding Lines
	timer          *time.Timer

	mu       sync.Mutex
	killed   bool // by Kill or the cleanup: its status is no failure
	timedOut bool // killed at its deadline: a failure
	waited   bool // the test has seen the status
	done     chan struct{}
	err      error // the status, once done is closed
}

// Spawn starts this test binary in role, as a child of tb: its output
// goes to the test log (line by line, named by role) unless the options
// take it, it is killed at its deadline, and at the test's end it is
// stopped and reaped; a child that failed (exited non-zero on its own, or
// reached its deadline) fails tb unless the test called Wait or set
// IgnoreExit. A child that cannot start fails tb at once.
func Spawn(tb testing.TB, role string, opts SpawnOptions) *Child {
	tb.Helper()
	c, err := start(tb, role, role, SelfArgv(), opts)
	if err != nil {
		tb.Fatalf("start %s: %v", role, err)
	}
	return c
}

// RunTest runs the test named name of this binary again, alone, in a
// child process (under an environment of opts.Env that the test checks
// for: a driver that does not exist, a fake one) and fails tb if it does
// not pass; the child's verbose output goes to the test log.
func RunTest(tb testing.TB, name string, opts SpawnOptions) {
	tb.Helper()
	argv := []string{os.Args[0], "-test.run=^" + name + "$", "-test.count=1", "-test.v"}
	c, err := start(tb, "", name, argv, opts)
	if err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	if err := c.Wait(); err != nil {
		tb.Fatal(err)
	}
}

// Run runs this test binary in role to its end and fails tb if it does
// not exit 0 (or runs past its deadline); its output goes to the test log.
func Run(tb testing.TB, role string, opts SpawnOptions) {
	tb.Helper()
	if err := Spawn(tb, role, opts).Wait(); err != nil {
		tb.Fatal(err)
	}
}

// start runs argv with role in the environment (none for ""), naming
// the child name in the log.
func start(tb testing.TB, role, name string, argv []string, opts SpawnOptions) (*Child, error) {
	command := opts.Command
	if command == nil {
		command = exec.Command
	}
	cmd := command(argv[0], argv[1:]...)
	cmd.Env = RoleEnviron(role, opts.Env...)
	cmd.WaitDelay = waitDelay
	c := &Child{tb: tb, role: name, opts: opts, cmd: cmd, done: make(chan struct{})}
	logLine := func(l string) { tb.Logf("%s: %s", name, l) }
	errLine := logLine
	if opts.Stderr != nil {
		errLine = opts.Stderr
	}
	c.stderr = &lineWriter{line: errLine}
	cmd.Stderr = c.stderr
	var stdout io.ReadCloser
	var err error
	if opts.Lines {
		if stdout, err = cmd.StdoutPipe(); err != nil {
			return nil, err
		}
		c.lines = make(chan string, 1024)
		c.Lines = c.lines
	} else {
		c.stdout = &lineWriter{line: logLine}
		cmd.Stdout = c.stdout
	}
	if opts.Stdin {
		if c.Stdin, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if stdout != nil {
		c.readers.Add(1)
		go c.readLines(stdout)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = untilDeadline(tb)
	}
	c.timer = time.AfterFunc(timeout, func() {
		c.mu.Lock()
		c.timedOut = true
		c.mu.Unlock()
		_ = cmd.Process.Kill()
	})
	go c.reap()
	tb.Cleanup(c.cleanup)
	return c, nil
}

// untilDeadline is the time left before the test binary's deadline, or
// 10 minutes without one.
func untilDeadline(tb testing.TB) time.Duration {
	if d, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if at, ok := d.Deadline(); ok {
			return max(time.Until(at), time.Second)
		}
	}
	return 10 * time.Minute
}

// readLines feeds Lines from the child's stdout until it closes.
func (c *Child) readLines(r io.Reader) {
	defer c.readers.Done()
	defer close(c.lines)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		c.lines <- sc.Text()
	}
}

// reap waits for the child (after its stdout is read to the end, as
// exec requires) and records how it ended.
func (c *Child) reap() {
	c.readers.Wait()
	err := c.cmd.Wait()
	c.timer.Stop()
	c.stdout.flush()
	c.stderr.flush()
	c.mu.Lock()
	switch {
	case c.timedOut:
		err = fmt.Errorf("%s (pid %d) killed at its deadline: %v", c.role, c.cmd.Process.Pid, err)
	case err != nil:
		err = fmt.Errorf("%s (pid %d): %w", c.role, c.cmd.Process.Pid, err)
	}
	c.err = err
	c.mu.Unlock()
	close(c.done)
}

// Pid is the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Signal sends sig to the child. Unlike Kill, the child's status still
// counts: a child told to stop must exit 0.
func (c *Child) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Kill ends the child with SIGKILL without waiting for it; its status is
// then no failure. Wait (or the test's end) reaps it.
func (c *Child) Kill() {
	c.mu.Lock()
	c.killed = true
	c.mu.Unlock()
	_ = c.cmd.Process.Kill()
}

// ReadLine returns the child's next stdout line (with Lines set),
// failing the test if the child ends its output first or says nothing
// within timeout. Call it from the test's goroutine.
func (c *Child) ReadLine(timeout time.Duration) string {
	c.tb.Helper()
	select {
	case l, ok := <-c.Lines:
		if !ok {
			c.tb.Fatalf("%s ended its output before its next line", c.role)
		}
		return l
	case <-time.After(timeout):
		c.tb.Fatalf("%s said nothing within %v", c.role, timeout)
	}
	return ""
}

// Done is closed once the child has exited and its output is read.
func (c *Child) Done() <-chan struct{} { return c.done }

// Wait waits for the child to exit (at most until its deadline) and
// returns nil for exit status 0, or an error naming the role and how it
// ended. A test that calls Wait owns the result: the cleanup does not
// report it again.
func (c *Child) Wait() error {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waited = true
	return c.err
}

// cleanup stops a child still running at the test's end, reaps it and
// reports a failure the test did not see.
func (c *Child) cleanup() {
	if c.Stdin != nil {
		_ = c.Stdin.Close()
	}
	// Unread lines go to the log; read on while the child stops, so that
	// a full channel cannot keep it from exiting.
	var rest chan []string
	if c.lines != nil {
		rest = make(chan []string, 1)
		go func() {
			var ls []string
			for l := range c.lines {
				ls = append(ls, l)
			}
			rest <- ls
		}()
	}
	select {
	case <-c.done:
	default:
		if c.opts.Stop == 0 || c.opts.Stop == syscall.SIGKILL {
			c.Kill()
		} else {
			_ = c.Signal(c.opts.Stop)
			select {
			case <-c.done:
			case <-time.After(stopGrace):
				c.Kill()
				c.tb.Errorf("%s did not exit within %v of %v", c.role, stopGrace, c.opts.Stop)
			}
		}
	}
	<-c.done
	if rest != nil {
		for _, l := range <-rest {
			c.tb.Logf("%s: %s", c.role, l)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil && !c.waited && (c.timedOut || !c.killed) && !c.opts.IgnoreExit {
		c.tb.Errorf("%v", c.err)
	}
}

// lineWriter hands what is written to it to line, one line at a time;
// flush passes on a last line without a newline.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	line func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			break
		}
		w.line(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

func (w *lineWriter) flush() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.line(string(w.buf))
		w.buf = nil
	}
}
