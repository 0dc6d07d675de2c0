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
)

// The test binary re-executes itself as the ranks of a job: with
// RDV_TEST_CHILD set, TestMain runs one rank instead of the tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv("RDV_TEST_CHILD"); mode != "" {
		if err := childRank(mode); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			var re *rendezvous.Error
			if errors.Is(err, rendezvous.ErrTimeout) && errors.As(err, &re) && slices.Contains(re.Missing, 2) {
				os.Exit(3) // the expected outcome of the missing-rank job
			}
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
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
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	env := append(os.Environ(), "RDV_TEST_CHILD=full")
	start := time.Now()
	err := rendezvous.Spawn(ctx, 8, []string{os.Args[0]}, env, rendezvous.SpawnOptions{Stdout: &out, Stderr: &errOut})
	require.NoError(t, err, "stderr:\n%s", errOut.String())
	t.Logf("8 processes bootstrapped, exchanged and exited in %v", time.Since(start))
	for r := range 8 {
		assert.Contains(t, out.String(), fmt.Sprintf("rank %d/8 ok", r))
	}
}

func TestProcessJobWithMissingRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errOut bytes.Buffer
	env := append(os.Environ(), "RDV_TEST_CHILD=skip2")
	err := rendezvous.Spawn(ctx, 4, []string{os.Args[0]}, env, rendezvous.SpawnOptions{Stdout: &errOut, Stderr: &errOut})
	var se *rendezvous.SpawnError
	require.ErrorAs(t, err, &se, "output:\n%s", errOut.String())
	assert.ErrorIs(t, err, rendezvous.ErrPeerLost)
	codes := map[int]int{}
	for _, r := range se.Ranks {
		codes[r.Rank] = r.ExitCode
	}
	// Rank 2 left at once; the first rank to see its absence fails with
	// exit 3 and the spawner then stops the others, which may also have
	// seen the timeout (3) or been terminated (-1).
	assert.Equal(t, 0, codes[2], errOut.String())
	three := 0
	for _, r := range []int{0, 1, 3} {
		assert.Contains(t, []int{3, -1}, codes[r], "rank %d:\n%s", r, errOut.String())
		if codes[r] == 3 {
			three++
		}
	}
	assert.Positive(t, three)
	assert.Contains(t, errOut.String(), "waiting for rank(s) [")
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
