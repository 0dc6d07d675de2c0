package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/netfault"
	"github.com/ferryrdma/ferry/internal/testutil"
)

func TestMain(m *testing.M) {
	roles := testutil.Roles{}
	for _, role := range []string{"target", "writer", "reap"} {
		roles[role] = func() error { return testutil.Exit(runAgent(role)) }
	}
	testutil.Main(m, roles, printTable)
}

// full selects the whole suite (make test-faults) over the fast subset.
var full = os.Getenv("FERRY_FAULTS_FULL") == "1"

// agent is one running agent process.
type agent struct {
	t      *testing.T
	role   string
	cmd    *testutil.Child
	stdin  io.WriteCloser
	events chan event
	pid    int
	dead   bool // killed by the test
}

func startAgent(t *testing.T, ns *netfault.Namespace, role string, cfg agentConfig) *agent {
	t.Helper()
	cj, _ := json.Marshal(cfg)
	opts := testutil.SpawnOptions{Env: []string{configEnv + "=" + string(cj)}, Stdin: true, Lines: true,
		Stderr: func(l string) { _, _ = logWriter{t, role}.Write([]byte(l)) }}
	if ns != nil {
		opts.Command = ns.Command
	}
	cmd := testutil.Spawn(t, role, opts)
	a := &agent{t: t, role: role, cmd: cmd, stdin: cmd.Stdin, events: make(chan event, 64), pid: cmd.Pid()}
	go func() {
		for line := range cmd.Lines {
			checkVerbs(t, role, line)
			if j, ok := strings.CutPrefix(line, "EVENT "); ok {
				var ev event
				if json.Unmarshal([]byte(j), &ev) == nil {
					a.events <- ev
					continue
				}
			}
			t.Logf("%s: %s", role, line)
		}
		close(a.events)
	}()
	return a
}

// checkVerbs fails the test when an agent's line (an event with its
// errors, a log line) holds a formatting mistake: a "%!" that fmt writes
// for a bad verb or argument, as "%!w(<nil>)" for a nil error wrapped.
func checkVerbs(t *testing.T, role, line string) {
	if strings.Contains(line, "%!") {
		t.Errorf("%s: a badly formatted error or log line: %s", role, line)
	}
}

// logWriter sends an agent's stderr to the test log.
type logWriter struct {
	t    *testing.T
	role string
}

func (w logWriter) Write(b []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		checkVerbs(w.t, w.role, l)
		if !strings.Contains(l, "INFO ferry engine") {
			w.t.Logf("%s: %s", w.role, l)
		}
	}
	return len(b), nil
}

// next waits for the agent's next event of kind, keeping the others it
// passes in seen.
func (a *agent) next(kind string, timeout time.Duration, seen map[string]event) event {
	a.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-a.events:
			if !ok {
				a.t.Fatalf("%s exited before its %q event", a.role, kind)
			}
			if ev.Kind == kind {
				return ev
			}
			if seen != nil {
				if _, dup := seen[ev.Kind]; !dup {
					seen[ev.Kind] = ev
				}
			}
		case <-deadline:
			a.t.Fatalf("%s: no %q event within %v", a.role, kind, timeout)
		}
	}
}

func (a *agent) send(format string, args ...any) {
	_, _ = fmt.Fprintf(a.stdin, format+"\n", args...)
}

func (a *agent) kill() {
	a.dead = true
	a.cmd.Kill()
	_ = a.cmd.Wait()
}

// row is one line of the suite's table.
type row struct {
	fault, transport, outcome, timeToError string
	verified                               int64
}

var (
	tableMu sync.Mutex
	table   []row
)

func record(r row) {
	tableMu.Lock()
	table = append(table, r)
	tableMu.Unlock()
}

func printTable() {
	if len(table) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| fault | transport | outcome | time to error | bytes verified |\n|---|---|---|---|---|\n")
	for _, r := range table {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.fault, r.transport, r.outcome, r.timeToError, fmtBytes(r.verified))
	}
	fmt.Print(b.String())
	if p := os.Getenv("FERRY_FAULTS_TABLE"); p != "" {
		_ = os.WriteFile(p, []byte(b.String()), 0o644)
	}
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return strconv.FormatInt(n, 10) + " B"
}

// requireNetns skips (or fails, under FERRY_TEST_REQUIRE=netns) where
// namespaces and TUN devices cannot be made.
func requireNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.Skip(t, "netns", "the fault suite builds network namespaces and TUN devices, which needs root")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		testutil.Skip(t, "netns", "no /dev/net/tun: %v", err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testutil.Skip(t, "netns", "no iproute2 ip command: %v", err)
	}
}

// shmFilesOf lists the /dev/shm region files of ferry endpoints of pid.
func shmFilesOf(pid int) []string {
	m, _ := filepath.Glob(fmt.Sprintf("/dev/shm/ferry-%d-*", pid))
	return m
}
