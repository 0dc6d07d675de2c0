package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/fabric/directory/etcd/etcdtest"
)

// The process test re-runs this test binary as the program: with
// DISAGG_POOLS_ARGS set, TestMain runs the program's roles instead of the
// tests.
func TestMain(m *testing.M) {
	if args := os.Getenv("DISAGG_POOLS_ARGS"); args != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, strings.Split(args, "\x1f"), os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestDemo runs the in-process story: p0 stopped mid-stream, its
// requests moved to p1, every request's bytes checked.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	w := &syncWriter{w: &out}
	code := run(context.Background(), []string{"demo", "-provider", "mem", "-requests", "12", "-chunk-time", "5ms"}, w, w)
	t.Logf("%s", lastLines(out.String(), 8))
	if code != 0 {
		t.Fatalf("demo exit status %d:\n%s", code, out.String())
	}
	checkDecode(t, out.String(), 12)
}

var summaryRE = regexp.MustCompile(`decode \S+: (\d+) requests served, (\d+) verified, (\d+) failed over`)

// checkDecode checks the decode's summary line: every request served and
// verified, at least one moved off the lost prefill p0.
func checkDecode(t *testing.T, out string, requests int) {
	t.Helper()
	m := summaryRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary line:\n%s", out)
	}
	served, _ := strconv.Atoi(m[1])
	verified, _ := strconv.Atoi(m[2])
	moved, _ := strconv.Atoi(m[3])
	if served != requests || verified != requests {
		t.Fatalf("%d served, %d verified, want %d", served, verified, requests)
	}
	if moved < 1 {
		t.Fatalf("p0 was killed mid-stream but no request failed over:\n%s", out)
	}
	if !strings.Contains(out, "decode: prefill p0 lost at ") {
		t.Fatalf("the decode never saw p0 lost:\n%s", out)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// proc is one role of the program in a child process; its output lines
// are collected and offered to waiters.
type proc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	out   strings.Builder
	lines chan string
	done  chan error
}

func start(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DISAGG_POOLS_ARGS="+strings.Join(args, "\x1f"))
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	p := &proc{cmd: cmd, lines: make(chan string, 4096), done: make(chan error, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", args, err)
	}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		w.Close()
		p.done <- err
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitLine waits for a line matching re.
func (p *proc) waitLine(t *testing.T, re *regexp.Regexp, d time.Duration) string {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case l := <-p.lines:
			if re.MatchString(l) {
				return l
			}
		case <-deadline:
			t.Fatalf("no line matching %q within %v:\n%s", re, d, p.output())
		}
	}
}

// TestProcesses runs every role as its own process over ipc, meeting
// through a real etcd: two prefill processes, a decode started after
// them, and prefill p0 killed with SIGKILL in the middle of a stream. The
// decode must see p0 lost (within the 2 s lease TTL: printed), move its
// requests to p1 and check every byte of every request.
func TestProcesses(t *testing.T) {
	srv := etcdtest.Start(t)
	url := "etcd://" + strings.TrimPrefix(srv.Client, "http://") + etcdtest.Prefix(t)
	const requests = 24
	common := []string{"-directory", url, "-provider", "ipc", "-ttl", "2s", "-timeout", "3m"}
	p0 := start(t, append([]string{"prefill", "-name", "p0"}, common...)...)
	p1 := start(t, append([]string{"prefill", "-name", "p1"}, common...)...)
	published := regexp.MustCompile(`prefill p\d: published`)
	p0.waitLine(t, published, time.Minute)
	p1.waitLine(t, published, time.Minute)

	dec := start(t, append([]string{"decode", "-name", "d0", "-prefills", "2", "-requests", fmt.Sprint(requests)}, common...)...)
	dec.waitLine(t, regexp.MustCompile(`found prefill engines \[p0 p1\]`), time.Minute)
	// Mid-stream: p0 has written chunk 3 of 8 of some request.
	p0.waitLine(t, regexp.MustCompile(`prefill p0: request \d+ chunk 3/8`), time.Minute)
	if err := p0.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	select {
	case err := <-dec.done:
		if err != nil {
			t.Fatalf("decode: %v\n%s", err, dec.output())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("decode did not finish:\n%s", dec.output())
	}
	out := dec.output()
	t.Logf("decode:\n%s", lastLines(out, 6))
	checkDecode(t, out, requests)
	m := regexp.MustCompile(`prefill p0 lost at (\S+):`).FindStringSubmatch(out)
	at, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("prefill p0 killed with SIGKILL: seen lost by the decode %.2f s later (lease TTL 2 s)", at.Sub(killed).Seconds())

	// p1 leaves in order: closed, not lost.
	_ = p1.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p1.done:
		if err != nil {
			t.Fatalf("prefill p1: %v\n%s", err, lastLines(p1.output(), 5))
		}
	case <-time.After(time.Minute):
		t.Fatalf("prefill p1 did not stop on SIGTERM")
	}
	if !strings.Contains(p1.output(), "prefill p1: closed") {
		t.Fatalf("p1 did not close its entry:\n%s", lastLines(p1.output(), 5))
	}
}
