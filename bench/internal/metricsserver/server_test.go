package metricsserver

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/fabrictest"
)

func TestServeEngine(t *testing.T) {
	ctx := context.Background()
	e, err := fabric.Open(ctx, fabric.Config{Transport: fabrictest.Null, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	defer e.Close(ctx)

	s, err := Start("127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, s.AddEngine(e, "engine", "server"))
	resp, err := http.Get(s.URL())
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	text := string(body)
	require.Contains(t, text, `ferry_engine_info{engine="server",poll="adaptive",provider="null",transport="null"} 1`)
	require.Contains(t, text, "ferry_nic_ops_in_flight{")
	require.Contains(t, text, "go_goroutines ")
	require.NoError(t, s.Close())
	_, err = http.Get(s.URL())
	require.Error(t, err, "closed")

	_, err = Start("127.0.0.1:-1")
	require.Error(t, err)
}

func TestOffset(t *testing.T) {
	for in, want := range map[string]string{"127.0.0.1:9464": "127.0.0.1:9467", ":9000": ":9003", "127.0.0.1:0": "127.0.0.1:0"} {
		got, err := Offset(in, 3)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	for _, bad := range []string{"9464", "h:x", "h:65535"} {
		_, err := Offset(bad, 3)
		require.Error(t, err, bad)
		require.True(t, strings.Contains(err.Error(), bad))
	}
}
