package rendezvoustest_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ferryrdma/ferry/fabric/rendezvous"
	"github.com/ferryrdma/ferry/fabric/rendezvous/rendezvoustest"
	"github.com/ferryrdma/ferry/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.Main(m, testutil.Roles{
		"rank": func() error {
			cfg, err := rendezvous.ConfigFromEnv(os.LookupEnv)
			if err != nil {
				return err
			}
			fmt.Printf("rank %d of %d, %s\n", cfg.Rank, cfg.WorldSize, os.Getenv("RANKJOB_TEST_WORD"))
			return nil
		},
		"rank1-fails": func() error {
			cfg, err := rendezvous.ConfigFromEnv(os.LookupEnv)
			if err != nil {
				return err
			}
			if cfg.Rank == 1 {
				return errors.New("rank 1 gives up")
			}
			return nil
		},
	})
}

func TestRun(t *testing.T) {
	out := rendezvoustest.MustRun(t, 3, "rank", rendezvoustest.Options{Env: []string{"RANKJOB_TEST_WORD=hello"}})
	for r := range 3 {
		if want := fmt.Sprintf("rank %d of 3, hello", r); !strings.Contains(out.Stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, out.Stdout)
		}
	}
}

func TestFailingRank(t *testing.T) {
	out, err := rendezvoustest.Run(t, 3, "rank1-fails", rendezvoustest.Options{KeepGoing: true})
	var se *rendezvous.SpawnError
	if !errors.As(err, &se) {
		t.Fatalf("error %v, want a *rendezvous.SpawnError", err)
	}
	for _, r := range se.Ranks {
		if failed := r.Err != nil; failed != (r.Rank == 1) {
			t.Errorf("rank %d: %v", r.Rank, r.Err)
		}
	}
	if !strings.Contains(out.Stderr, "rank1-fails: rank 1 gives up") {
		t.Errorf("stderr lacks the failing rank's error:\n%s", out.Stderr)
	}
}
