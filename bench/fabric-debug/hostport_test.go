package main

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// TestClientHostPort: a tcp;ofi_rxm serve prints its host:port, and a
// client given that host:port instead of the hex address runs verified;
// host:port with a transport whose addresses are no socket addresses is
// refused, saying why.
func TestClientHostPort(t *testing.T) {
	exe := buildCommand(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := exec.CommandContext(ctx, exe, "serve", "--transport", "tcp;ofi_rxm", "--node", "127.0.0.1", "--buffer-mib", "8")
	out, err := srv.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	hostport := ""
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "# or:  fabric-debug client "); ok {
			hostport = strings.Fields(rest)[0]
			break
		}
		if strings.Contains(sc.Text(), "does not run here") || strings.HasPrefix(sc.Text(), "fabric-debug:") {
			break
		}
	}
	if hostport == "" {
		t.Skip("tcp;ofi_rxm serve printed no host:port (libfabric tcp unavailable?)")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	require.True(t, strings.HasPrefix(hostport, "127.0.0.1:"), hostport)
	stdout, stderr, code := runCommand(t, exe, "client", hostport, "--transport", "tcp;ofi_rxm", "--node", "127.0.0.1",
		"--workloads", "single", "--sizes", "4K", "--iters", "2", "--buffer-mib", "8")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", stdout, stderr)
	require.Contains(t, stdout, "# done: 1 cases, 1 verified, 0 failed")

	_, err = serverAddress("shm", "127.0.0.1:5000")
	require.ErrorIs(t, err, fabric.ErrInvalidArgument)
	require.ErrorContains(t, err, "use the hex address")
	_, errOut, code := runHere("client", "127.0.0.1:5000", "--transport", "shm")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "only tcp;ofi_rxm addresses are socket addresses")
}

// TestHelpAcrossHosts: -h says how to run across hosts.
func TestHelpAcrossHosts(t *testing.T) {
	_, errOut, code := runHere("-h")
	require.Equal(t, exitOK, code)
	for _, s := range []string{"FERRY_MASTER", "FERRY_ALLOW_REMOTE=1", "FERRY_JOB_TOKEN", "client HOST:PORT"} {
		require.Contains(t, errOut, s)
	}
}
