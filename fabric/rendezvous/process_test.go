package rendezvous_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ferryrdma/ferry/fabric/rendezvous"
	"github.com/ferryrdma/ferry/fabric/rendezvous/rendezvoustest"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// The test binary re-executes itself as the ranks of a job: in the role
// "full" or "skip2", TestMain runs one rank instead of the tests.
func TestMain(m *testing.M) {
	testutil.Main(m, testutil.Roles{"full": func() error { return rank("full") }, "skip2": func() error { return rank("skip2") }})
}

// rank runs childRank, giving exit status 3 for the expected outcome of
// the missing-rank job.
func rank(mode string) error {
	err := childRank(mode)
	var re *rendezvous.Error
	if errors.Is(err, rendezvous.ErrTimeout) && errors.As(err, &re) && slices.Contains(re.Missing, 2) {
		return fmt.Errorf("child: %w: %w", err, testutil.ExitStatus(3))
	}
	return err
}

func childRank(mode string) error {
	cfg, err := rendezvous.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		return err
	}
	if mode == "skip2" && cfg.Rank == 2 {
		return nil // this rank never shows up
	}
	timeout := 30 * time.Second
	if mode == "skip2" {
		timeout = 4 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	g, err := rendezvous.Join(ctx, cfg)
	if err != nil {
		return err
	}
	defer g.Close()
	mine := []byte(fmt.Sprintf("pid %d rank %d", os.Getpid(), g.Rank()))
	parts, err := g.AllGather(ctx, mine)
	if err != nil {
		return err
	}
	for r, p := range parts {
		if !bytes.HasSuffix(p, []byte(" rank "+strconv.Itoa(r))) {
			return fmt.Errorf("part %d is %q", r, p)
		}
	}
	got, err := g.Broadcast(ctx, 5, []byte("from five"))
	if err != nil {
		return err
	}
	if g.Rank() != 5 && string(got) != "from five" {
		return fmt.Errorf("broadcast gave %q", got)
	}
	if err := g.Barrier(ctx); err != nil {
		return err
	}
	fmt.Printf("rank %d/%d ok\n", g.Rank(), g.WorldSize())
	return nil
}

func TestEightRanksAsProcesses(t *testing.T) {
	start := time.Now()
	out := rendezvoustest.MustRun(t, 8, "full", rendezvoustest.Options{Timeout: 60 * time.Second})
	t.Logf("8 processes bootstrapped, exchanged and exited in %v", time.Since(start))
	for r := range 8 {
		assert.Contains(t, out.Stdout, fmt.Sprintf("rank %d/8 ok", r))
	}
}

func TestProcessJobWithMissingRank(t *testing.T) {
	out, err := rendezvoustest.Run(t, 4, "skip2", rendezvoustest.Options{Timeout: 30 * time.Second})
	errOut := out.Stdout + out.Stderr
	var se *rendezvous.SpawnError
	require.ErrorAs(t, err, &se, "output:\n%s", errOut)
	assert.ErrorIs(t, err, rendezvous.ErrPeerLost)
	codes := map[int]int{}
	for _, r := range se.Ranks {
		codes[r.Rank] = r.ExitCode
	}
	// Rank 2 left at once; the first rank to see its absence fails with
	// exit 3 and the spawner then stops the others, which may also have
	// seen the timeout (3) or been terminated (-1).
	assert.Equal(t, 0, codes[2], errOut)
	three := 0
	for _, r := range []int{0, 1, 3} {
		assert.Contains(t, []int{3, -1}, codes[r], "rank %d:\n%s", r, errOut)
		if codes[r] == 3 {
			three++
		}
	}
	assert.Positive(t, three)
	assert.Contains(t, errOut, "waiting for rank(s) [")
}

func TestSpawnBadArguments(t *testing.T) {
	err := rendezvous.SpawnLocal(context.Background(), 0, []string{"true"}, nil)
	assert.ErrorIs(t, err, rendezvous.ErrInvalidConfig)
	err = rendezvous.SpawnLocal(context.Background(), 2, nil, nil)
	assert.ErrorIs(t, err, rendezvous.ErrInvalidConfig)
	err = rendezvous.SpawnLocal(context.Background(), 2, []string{"/nonexistent/ferry-binary"}, nil)
	var se *rendezvous.SpawnError
	require.ErrorAs(t, err, &se)
	assert.Error(t, se.Ranks[0].Err)
}
