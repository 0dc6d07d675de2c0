package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric"
)

// TestStartBounded: a watch whose start waits for a server that does not
// answer gives up at its timeout with a timeout error, and its context
// ends; one that starts in time keeps its context until cancelled.
func TestStartBounded(t *testing.T) {
	var started context.Context
	t0 := time.Now()
	cancel, err := startBounded("watch", context.Background(), 50, func(ctx context.Context) error {
		started = ctx
		<-ctx.Done() // a server that never answers
		return ctx.Err()
	})
	require.Nil(t, cancel)
	require.ErrorIs(t, err, fabric.ErrTimeout)
	require.Equal(t, codeTimeout, codeOf(err))
	require.Error(t, started.Err(), "the start's context ended")
	require.Less(t, time.Since(t0), 10*time.Second)

	cancel, err = startBounded("watch", context.Background(), 10000, func(ctx context.Context) error {
		started = ctx
		return nil
	})
	require.NoError(t, err)
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, started.Err(), "a started watch lives on")
	cancel()
	require.Error(t, started.Err())

	boom := errors.New("refused")
	_, err = startBounded("watch", context.Background(), 10000, func(context.Context) error { return boom })
	require.ErrorIs(t, err, boom)
	_, err = startBounded("watch", context.Background(), -1, func(context.Context) error { return nil })
	require.ErrorIs(t, err, errInvalidArgument)
}
