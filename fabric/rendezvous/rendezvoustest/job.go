package rendezvoustest

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/rendezvous"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// Options are a job's settings.
type Options struct {
	// Env is added to the parent's environment of every rank.
	Env []string
	// Timeout bounds the whole job; 0 means 5 minutes.
	Timeout time.Duration
	// KeepGoing lets the other ranks run on when one fails (a job meant
	// to survive the loss of ranks): see rendezvous.SpawnOptions.
	KeepGoing bool
}

// Output is what a job's ranks printed, all ranks together.
type Output struct{ Stdout, Stderr string }

// Run runs world processes of this test binary in role as ranks
// 0..world-1 of one job and waits for them. What the ranks print goes to
// the test log, line by line, and is returned for the test to check; the
// error is rendezvous.Spawn's (a *rendezvous.SpawnError naming the ranks
// that failed), for the test to judge.
func Run(tb testing.TB, world int, role string, opts Options) (Output, error) {
	tb.Helper()
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stdout, stderr := &logBuffer{tb: tb}, &logBuffer{tb: tb}
	err := rendezvous.Spawn(ctx, world, testutil.SelfArgv(), testutil.RoleEnviron(role, opts.Env...),
		rendezvous.SpawnOptions{Stdout: stdout, Stderr: stderr, KeepGoing: opts.KeepGoing})
	stdout.flush()
	stderr.flush()
	return Output{stdout.String(), stderr.String()}, err
}

// MustRun is Run for a job every rank of which must succeed: it fails tb
// otherwise.
func MustRun(tb testing.TB, world int, role string, opts Options) Output {
	tb.Helper()
	out, err := Run(tb, world, role, opts)
	if err != nil {
		tb.Fatalf("%s job of %d ranks: %v", role, world, err)
	}
	return out
}

// logBuffer keeps the ranks' output and logs each complete line.
type logBuffer struct {
	tb      testing.TB
	mu      sync.Mutex
	all     bytes.Buffer
	partial []byte
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.all.Write(p)
	b.partial = append(b.partial, p...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		b.tb.Log(string(b.partial[:i]))
		b.partial = b.partial[i+1:]
	}
	return len(p), nil
}

func (b *logBuffer) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(strings.TrimSpace(string(b.partial))) > 0 {
		b.tb.Log(string(b.partial))
	}
	b.partial = nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.all.String()
}
