package fabric_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/internal/testutil"
	_ "github.com/ferryrdma/ferry/memfabric"
)

// logsOf opens and closes a mem engine logging to a handler that takes
// everything, with the given LogLevel, and returns what was logged.
func logsOf(t *testing.T, level slog.Leveler) string {
	t.Helper()
	var buf testutil.Buffer
	h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	e, err := fabric.Open(context.Background(), fabric.Config{Transport: "mem", Logger: slog.New(h), LogLevel: level})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, e.Close(ctx))
	return buf.String()
}

// The engine is quiet by default, even through a handler that would take
// debug records, and says more when asked, through the caller's handler.
func TestLogLevel(t *testing.T) {
	require.Empty(t, logsOf(t, nil), "default: warnings and errors only")
	require.Empty(t, logsOf(t, slog.LevelWarn))
	info := logsOf(t, slog.LevelInfo)
	require.Contains(t, info, "ferry engine open")
	require.Contains(t, info, "ferry engine closed")
	require.NotContains(t, info, "ferry worker start")
	debug := logsOf(t, slog.LevelDebug)
	require.Contains(t, debug, "ferry worker start")
	require.Contains(t, debug, "ferry worker stop")
}
