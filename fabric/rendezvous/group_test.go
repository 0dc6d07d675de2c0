package rendezvous_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

func payload(rank, round int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("r%d/%d;", rank, round)), 1+(rank*round)%97)
}

func TestEightRanksAsGoroutines(t *testing.T) {
	leakCheck(t)
	const n = 8
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfgs := world(t, n)
	gs, errs := joinAll(ctx, cfgs, []int{0, 1, 2, 3, 4, 5, 6, 7})
	defer closeAll(gs)
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	var wg sync.WaitGroup
	fails := make([]error, n)
	for r, g := range gs {
		wg.Go(func() {
			fails[r] = func() error {
				for round := range 20 {
					parts, err := g.AllGather(ctx, payload(r, round))
					if err != nil {
						return err
					}
					for peer, p := range parts {
						if !bytes.Equal(p, payload(peer, round)) {
							return fmt.Errorf("round %d: part of rank %d is %q", round, peer, p)
						}
					}
					root := round % n
					got, err := g.Broadcast(ctx, root, payload(r, round))
					if err != nil {
						return err
					}
					if !bytes.Equal(got, payload(root, round)) {
						return fmt.Errorf("round %d: broadcast from %d gave %q", round, root, got)
					}
					if err := g.Barrier(ctx); err != nil {
						return err
					}
				}
				return nil
			}()
		})
	}
	wg.Wait()
	for r, err := range fails {
		assert.NoError(t, err, "rank %d", r)
	}
	assert.Equal(t, 3, gs[3].Rank())
	assert.Equal(t, n, gs[3].WorldSize())
}

func TestWorldOfOne(t *testing.T) {
	g, err := rendezvous.Join(context.Background(), rendezvous.Config{WorldSize: 1})
	require.NoError(t, err)
	parts, err := g.AllGather(context.Background(), []byte("x"))
	require.NoError(t, err)
	assert.Equal(t, [][]byte{[]byte("x")}, parts)
	require.NoError(t, g.Barrier(context.Background()))
	require.NoError(t, g.Close())
	require.NoError(t, g.Close())
	assert.ErrorIs(t, g.Barrier(context.Background()), rendezvous.ErrClosed)
}

func TestJoinNamesMissingRanks(t *testing.T) {
	leakCheck(t)
	cfgs := world(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), missDeadline)
	defer cancel()
	start := time.Now()
	gs, errs := joinAll(ctx, cfgs, []int{0, 1, 3})
	defer closeAll(gs)
	// Join gives up at its deadline, or a moment after it while rank 0's
	// late report comes in; the rest is slack for a loaded machine.
	assert.Less(t, time.Since(start), 2*missDeadline+rendezvous.LateReportGrace)
	for _, r := range []int{0, 1, 3} {
		require.Error(t, errs[r], "rank %d", r)
		assert.ErrorIs(t, errs[r], rendezvous.ErrTimeout)
		var re *rendezvous.Error
		require.ErrorAs(t, errs[r], &re)
		assert.Equal(t, []int{2, 4}, re.Missing, "rank %d: %v", r, errs[r])
		assert.Contains(t, errs[r].Error(), "[2 4]")
	}
}

// TestJoinNamesManyMissingRanks: rank 0's report names every rank missing
// from the join, however many: with three of five missing, its error frame
// is larger than the welcome the joiners expect, and must still be read.
func TestJoinNamesManyMissingRanks(t *testing.T) {
	leakCheck(t)
	cfgs := world(t, 5)
	ctx, cancel := context.WithTimeout(context.Background(), missDeadline)
	defer cancel()
	gs, errs := joinAll(ctx, cfgs, []int{0, 1})
	defer closeAll(gs)
	for _, r := range []int{0, 1} {
		require.ErrorIs(t, errs[r], rendezvous.ErrTimeout, "rank %d", r)
		var re *rendezvous.Error
		require.ErrorAs(t, errs[r], &re)
		assert.Equal(t, []int{2, 3, 4}, re.Missing, "rank %d: %v", r, errs[r])
	}
}

func TestJoinWithoutRankZero(t *testing.T) {
	cfgs := world(t, 2)
	cfgs[0].Listener.Close() // nobody serves
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := rendezvous.Join(ctx, cfgs[1])
	require.ErrorIs(t, err, rendezvous.ErrTimeout)
	var re *rendezvous.Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, []int{0}, re.Missing)
}

func TestCollectiveNamesMissingRank(t *testing.T) {
	leakCheck(t)
	cfgs := world(t, 3)
	gs, errs := joinAll(context.Background(), cfgs, []int{0, 1, 2})
	defer closeAll(gs)
	require.NoError(t, errors.Join(errs...))
	ctx, cancel := context.WithTimeout(context.Background(), missDeadline)
	defer cancel()
	var wg sync.WaitGroup
	got := make([]error, 2)
	for r := range 2 {
		wg.Go(func() { _, got[r] = gs[r].AllGather(ctx, []byte{byte(r)}) })
	}
	wg.Wait()
	for r, err := range got {
		require.ErrorIs(t, err, rendezvous.ErrTimeout, "rank %d", r)
		var re *rendezvous.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, []int{2}, re.Missing)
		assert.Equal(t, "allgather", re.Op)
	}
	// The group is broken now, for every rank, late ones included.
	assert.ErrorIs(t, gs[0].Barrier(context.Background()), rendezvous.ErrTimeout)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	_, err := gs[2].AllGather(ctx2, nil)
	assert.ErrorIs(t, err, rendezvous.ErrTimeout)
}

func TestBadJoiners(t *testing.T) {
	leakCheck(t)
	cfgs := world(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gs := make([]*rendezvous.Group, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for _, r := range []int{0, 1} {
		wg.Go(func() { gs[r], errs[r] = rendezvous.Join(ctx, cfgs[r]) })
	}
	defer closeAll(gs)

	bad := cfgs[2]
	bad.Token = "not-the-token"
	_, err := rendezvous.Join(ctx, bad)
	require.ErrorIs(t, err, rendezvous.ErrAuth)
	assert.Contains(t, err.Error(), "wrong job token")

	bad = cfgs[2]
	bad.WorldSize = 4
	_, err = rendezvous.Join(ctx, bad)
	require.ErrorIs(t, err, rendezvous.ErrRejected)
	assert.Contains(t, err.Error(), "world has 4 ranks")

	gs[2], errs[2] = rendezvous.Join(ctx, cfgs[2])
	require.NoError(t, errs[2], "the real rank 2 still gets in")
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	for _, g := range gs {
		wg.Go(func() { assert.NoError(t, g.Barrier(ctx)) })
	}
	wg.Wait()
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []rendezvous.Config{
		{Rank: 2, WorldSize: 2, Token: "t"},
		{Rank: 0, WorldSize: 0},
		{Rank: 1, WorldSize: 2, Master: "127.0.0.1:1"},                     // no token
		{Rank: 1, WorldSize: 2, Master: "10.1.2.3:29500", Token: "t"},      // not loopback
		{Rank: 1, WorldSize: 2, Master: "node7.example:29500", Token: "t"}, // a name
		{Rank: 1, WorldSize: 2, Master: "no-port", Token: "t"},
		{Rank: 0, WorldSize: 2, Master: "127.0.0.1:1", Token: "t", MaxMessage: -1},
	} {
		_, err := rendezvous.Join(context.Background(), c)
		assert.ErrorIs(t, err, rendezvous.ErrInvalidConfig, "%+v", c)
	}
	c, err := rendezvous.Config{Rank: 1, WorldSize: 2, Master: "localhost:5", Token: "t"}.Validate()
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:5", c.Master)
	_, err = rendezvous.Config{Rank: 1, WorldSize: 2, Master: "[::1]:5", Token: "t"}.Validate()
	require.NoError(t, err)
	_, err = rendezvous.Config{Rank: 1, WorldSize: 2, Master: "10.1.2.3:5", Token: "t", AllowRemote: true}.Validate()
	require.NoError(t, err, "explicit opt-in")
}

func TestTooLargeIsRefusedLocally(t *testing.T) {
	leakCheck(t)
	cfgs := world(t, 2)
	for r := range cfgs {
		cfgs[r].MaxMessage = 1024
	}
	gs, errs := joinAll(context.Background(), cfgs, []int{0, 1})
	defer closeAll(gs)
	require.NoError(t, errors.Join(errs...))
	_, err := gs[1].AllGather(context.Background(), make([]byte, 1025))
	assert.ErrorIs(t, err, rendezvous.ErrTooLarge)
	// Refused before sending: the group still works.
	var wg sync.WaitGroup
	for _, g := range gs {
		wg.Go(func() { _, err := g.AllGather(context.Background(), make([]byte, 1024)); assert.NoError(t, err) })
	}
	wg.Wait()
}

func TestCloseUnblocksCollective(t *testing.T) {
	leakCheck(t)
	cfgs := world(t, 2)
	gs, errs := joinAll(context.Background(), cfgs, []int{0, 1})
	require.NoError(t, errors.Join(errs...))
	done := make(chan error, 1)
	go func() { done <- gs[1].Barrier(context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	gs[0].Close()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, rendezvous.ErrPeerLost)
	case <-time.After(5 * time.Second):
		t.Fatal("barrier did not end when rank 0 closed")
	}
	gs[1].Close()
}
