package directory_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric/directory"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// Three processes (goroutines here) gather through the directory, get
// ranks by name, and join a rendezvous whose store rank 0 serves.
func TestWorldConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := directory.NewMemory()
	defer m.Close()
	sel, err := directory.ParseSelector("job=j1")
	require.NoError(t, err)
	base := rendezvous.Config{Token: "t0k3n"}
	const world = 3
	var wg sync.WaitGroup
	gathered := make([][][]byte, world)
	for i := range world {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if !assertNoError(t, err) {
				return
			}
			name := fmt.Sprintf("w%d", (i+1)%world) // names out of start order
			me := directory.Entry{Name: name, NICs: 1, Addrs: addrs(name, 1),
				Labels: map[string]string{"job": "j1", directory.RendezvousLabel: ln.Addr().String()}}
			pub, err := m.Publish(ctx, me)
			if !assertNoError(t, err) {
				return
			}
			defer pub.Close(ctx)
			cfg, err := directory.WorldConfig(ctx, m, me, sel, world, ln, base)
			if !assertNoError(t, err) {
				return
			}
			g, err := rendezvous.Join(ctx, cfg)
			if !assertNoError(t, err) {
				return
			}
			defer g.Close()
			all, err := g.AllGather(ctx, []byte(name))
			if !assertNoError(t, err) {
				return
			}
			gathered[g.Rank()] = all
			// Every process stays published until all have gathered.
			assertNoError(t, g.Barrier(ctx))
		}()
	}
	wg.Wait()
	for r := range world {
		require.Equal(t, [][]byte{[]byte("w0"), []byte("w1"), []byte("w2")}, gathered[r], "rank %d: ranks in name order", r)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	me := directory.Entry{Name: "x", NICs: 1, Addrs: addrs("x", 1), Labels: map[string]string{"job": "j1"}}
	_, err = directory.WorldConfig(ctx, m, me, sel, 1, ln, base)
	require.ErrorIs(t, err, directory.ErrInvalid, "an entry without its listener's label")
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}
