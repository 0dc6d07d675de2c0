package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric/directory/etcd/etcdtest"
)

// lostData tells the server a watch follows from one that lost its data.
func TestLostData(t *testing.T) {
	s := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := Open(ctx, Config{Endpoints: []string{s.Client}, Prefix: etcdtest.Prefix(t)})
	require.NoError(t, err)
	defer d.Close()
	w := &watcher{d: d, ctx: ctx, seen: make(map[string]known)}
	rev, err := w.list()
	require.NoError(t, err)
	require.False(t, w.lostData(rev), "the same server")
	require.True(t, w.lostData(rev+100), "a revision gone back")
	w.cluster++
	require.True(t, w.lostData(rev), "another cluster")
}
