package jobtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/fabrictest"
	"github.com/ferryrdma/ferry/fabric/job"
)

// Build builds the program in the current directory (a test's working
// directory is its package's) and returns the binary's path.
func Build(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds and runs the program")
	}
	exe := filepath.Join(t.TempDir(), filepath.Base(mustGetwd(t)))
	out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// Result is one run of a program.
type Result struct {
	Stdout, Stderr string
	Code           int
	// Report is the -json document, decoded into a generic map.
	Report map[string]any
}

// Run runs exe with args plus -json FILE and a -timeout, and decodes the
// report when the run succeeded. A -provider whose transport cannot open
// here skips the test, saying why (a failure where FERRY_TEST_REQUIRE
// promises it).
func Run(t *testing.T, exe string, args ...string) Result {
	t.Helper()
	for i, a := range args[:len(args)-1] {
		if a == "-provider" {
			if tr, node, ok := job.Transport(args[i+1]); ok {
				fabrictest.RequireTransport(t, tr, node)
			}
		}
	}
	js := filepath.Join(t.TempDir(), "report.json")
	args = append(args, "-json", js, "-timeout", "90s")
	var o, e bytes.Buffer
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	res := Result{Stdout: o.String(), Stderr: e.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.Code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run %v: %v", args, err)
	}
	if res.Code == 0 {
		b, err := os.ReadFile(js)
		if err != nil {
			t.Fatalf("run %v: no report: %v\nstdout:\n%s\nstderr:\n%s", args, err, res.Stdout, res.Stderr)
		}
		if err := json.Unmarshal(b, &res.Report); err != nil {
			t.Fatalf("run %v: report: %v\n%s", args, err, b)
		}
	}
	return res
}

// RequireOK fails the test unless the run exited 0 with a verified report
// from the expected number of ranks.
func (r Result) RequireOK(t *testing.T, ranks int) {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("exit status %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if r.Report["verified"] != true {
		t.Fatalf("report not verified: %v", r.Report["verified"])
	}
	if got := r.Report["ranks"]; got != float64(ranks) {
		t.Fatalf("report from %v ranks, want %d", got, ranks)
	}
	if _, ok := r.Report["engine"].(map[string]any); !ok {
		t.Fatalf("report has no engine info: %v", r.Report)
	}
}

// Results returns the report's "results" object.
func (r Result) Results(t *testing.T) map[string]any {
	t.Helper()
	m, ok := r.Report["results"].(map[string]any)
	if !ok {
		t.Fatalf("report has no results object: %v", r.Report)
	}
	return m
}
