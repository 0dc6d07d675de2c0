package etcd_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"
)

// server is a one-member etcd cluster on loopback, run from the etcd
// binary on PATH (Debian's etcd-server: make deps installs it), with its
// data in a temporary directory and free ports.
type server struct {
	t            testing.TB
	bin, dataDir string
	client, peer string // URLs
	cmd          *exec.Cmd
	exited       chan struct{}
}

// startEtcd starts a server for t and stops it when t ends. It skips (or
// fails, where FERRY_TEST_REQUIRE lists etcd) when there is no etcd.
func startEtcd(t testing.TB) *server {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		testutil.Skip(t, "etcd", "no etcd binary on PATH (apt-get install etcd-server, or make deps)")
	}
	s := &server{t: t, bin: bin, dataDir: filepath.Join(t.TempDir(), "data"),
		client: "http://" + freeAddr(t), peer: "http://" + freeAddr(t)}
	s.start()
	t.Cleanup(s.kill)
	return s
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs etcd on s's data directory and ports and waits until it
// reports healthy.
func (s *server) start() {
	s.t.Helper()
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(s.dataDir), "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatalf("etcd log: %v", err)
	}
	defer logf.Close()
	s.cmd = exec.Command(s.bin,
		"--name", "ferry-test",
		"--data-dir", s.dataDir,
		"--listen-client-urls", s.client,
		"--advertise-client-urls", s.client,
		"--listen-peer-urls", s.peer,
		"--initial-advertise-peer-urls", s.peer,
		"--initial-cluster", "ferry-test="+s.peer,
		"--initial-cluster-state", "new",
		"--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn",
	)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	// Killed with the test process, so a test killed mid-run leaves no
	// server behind.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start etcd: %v", err)
	}
	s.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.exited)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s.healthy() {
			return
		}
		select {
		case <-s.exited:
			s.t.Fatalf("etcd exited at start: %s", s.log())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("etcd not healthy after 30s: %s", s.log())
		}
	}
}

func (s *server) healthy() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.client+"/health", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// kill stops the server with SIGKILL and waits for it to exit.
func (s *server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

func (s *server) log() string {
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(s.dataDir), "etcd.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return strings.TrimSpace(string(b))
}

// prefix returns a key prefix of its own for test t.
func (s *server) prefix(t testing.TB) string {
	return fmt.Sprintf("/ferry-test/%s", strings.ReplaceAll(t.Name(), "/", "_"))
}
