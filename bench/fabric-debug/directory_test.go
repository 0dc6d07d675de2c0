package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric/directory/etcd/etcdtest"
)

// A server published in an etcd directory is found by a client's label
// selector, and is gone from it once stopped.
func TestCommandDirectory(t *testing.T) {
	etcdSrv := etcdtest.Start(t)
	exe := buildCommand(t)
	url := "etcd://" + strings.TrimPrefix(etcdSrv.Client, "http://") + etcdtest.Prefix(t)

	srv := exec.Command(exe, "serve", "--provider", "shm", "--directory", url, "--name", "p0", "--labels", "role=prefill,model=m1")
	srv.Stderr = os.Stderr
	out, err := srv.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	lines := bufio.NewScanner(out)
	published := false
	for !published && lines.Scan() {
		published = strings.HasPrefix(lines.Text(), "# published as p0 in "+url)
	}
	require.True(t, published, "serve did not publish itself")
	go func() {
		for lines.Scan() {
		}
	}()

	_, errOut, code := runCommand(t, exe, "client", "--provider", "shm", "--directory", url, "--select", "role=decode")
	require.Equal(t, exitFail, code)
	require.Contains(t, errOut, "no engine")
	stdout, errOut, code := runCommand(t, exe, "client", "--provider", "shm", "--directory", url, "--select", "role=prefill",
		"--workloads", "single", "--sizes", "4K", "--iters", "2", "--buffer-mib", "8")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	require.Contains(t, errOut, "using p0")
	require.Contains(t, stdout, "# done: 1 cases, 1 verified, 0 failed")

	require.NoError(t, srv.Process.Signal(syscall.SIGINT))
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop on SIGINT")
	}
	_, errOut, code = runCommand(t, exe, "client", "--provider", "shm", "--directory", url, "--select", "role=prefill")
	require.Equal(t, exitFail, code, "an orderly stop removes the entry at once")
	require.Contains(t, errOut, "no engine")
}
