package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer two goroutines can share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls b until re matches, and returns the first group.
func waitFor(t *testing.T, b *syncBuffer, re string) string {
	t.Helper()
	r := regexp.MustCompile(re)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := r.FindStringSubmatch(b.String()); m != nil {
			return m[1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %q in:\n%s", re, b.String())
	return ""
}

// serve --metrics exports the server engine's counters: a client's run
// shows up in a scrape over loopback HTTP.
func TestServeMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--provider", "mem", "--buffer-mib", "8", "--metrics", "127.0.0.1:0"}, &out, &errOut)
	}()
	defer func() {
		cancel()
		require.Equal(t, exitOK, <-done, "server exit; stderr:\n%s", errOut.String())
	}()
	url := waitFor(t, &errOut, `# metrics: (http://127\.0\.0\.1:\d+/metrics)`)
	addr := waitFor(t, &out, `Main Address: ([0-9a-f]+)`)

	stdout, stderr, code := runHere("client", addr, "--provider", "mem", "--buffer-mib", "8", "--workloads", "single",
		"--sizes", "64K", "--iters", "5")
	require.Equal(t, exitOK, code, "client:\n%s\n%s", stdout, stderr)

	resp, err := http.Get(url)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^ferry_nic_bytes_total\{device="host",engine="server",index="0",nic="[^"]*"\} (\S+)$`).
		FindStringSubmatch(string(body))
	require.NotNil(t, m, "no server byte counter in:\n%s", body)
	n, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	// Five timed writes of 64 KiB and the check pass (--iters without
	// --warmup runs none), plus the control messages.
	require.GreaterOrEqual(t, n, float64(6*64<<10))
	require.Contains(t, string(body), `ferry_transfers_failed_total{engine="server"} 0`)
	require.Regexp(t, `ferry_transfers_completed_total\{engine="server"\} [1-9]`, string(body))
}
