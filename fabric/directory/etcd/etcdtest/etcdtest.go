// Package etcdtest runs a one-member etcd server on loopback for tests:
// Debian's etcd-server binary (make deps installs it), a temporary data
// directory and free ports. Tests skip without it, or fail where
// FERRY_TEST_REQUIRE lists etcd.
package etcdtest

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

// Server is a one-member etcd cluster on loopback, run from the etcd
// binary on PATH, with its data in a temporary directory and free ports.
type Server struct {
	// Client is the client URL (http://127.0.0.1:PORT).
	Client string
	// DataDir is the server's data directory: remove it between Kill and
	// Start for a server that lost its data.
	DataDir string
	t       testing.TB
	bin     string
	peer    string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// Start starts a server for t and kills it when t ends. It skips t (or
// fails it, where FERRY_TEST_REQUIRE lists etcd) when there is no etcd.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		testutil.Skip(t, "etcd", "no etcd binary on PATH (apt-get install etcd-server, or make deps)")
	}
	s := &Server{t: t, bin: bin, DataDir: filepath.Join(t.TempDir(), "data"),
		Client: "http://" + freeAddr(t), peer: "http://" + freeAddr(t)}
	s.Start()
	t.Cleanup(s.Kill)
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

// Start runs etcd on s's data directory and ports (again, after Kill)
// and waits until it reports healthy.
func (s *Server) Start() {
	s.t.Helper()
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(s.DataDir), "etcd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatalf("etcd log: %v", err)
	}
	defer logf.Close()
	s.cmd = exec.Command(s.bin,
		"--name", "ferry-test",
		"--data-dir", s.DataDir,
		"--listen-client-urls", s.Client,
		"--advertise-client-urls", s.Client,
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

func (s *Server) healthy() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Client+"/health", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Kill stops the server with SIGKILL and waits for it to exit.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

func (s *Server) log() string {
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(s.DataDir), "etcd.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return strings.TrimSpace(string(b))
}

// Prefix returns a key prefix of its own for test t.
func Prefix(t testing.TB) string {
	return fmt.Sprintf("/ferry-test/%s", strings.ReplaceAll(t.Name(), "/", "_"))
}
