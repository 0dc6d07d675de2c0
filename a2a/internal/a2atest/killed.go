//go:build linux

package a2atest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/workload"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// KillJob is a SIGKILL test of a world of processes: what KilledRank runs
// in each rank and KillResults checks in the parent.
type KillJob struct {
	Victim  int           // the rank that SIGKILLs itself mid-iteration
	Dir     string        // where ranks leave the kill time and their results
	Timeout time.Duration // the backend's timeout: survivors must fail within it
	Iters   int           // iterations the survivors run without the victim
	// Restart brings the victim back afterwards: the parent starts a new
	// process for it (RestartedRank), and every rank joins generation 2
	// with all ranks active, exchanging descriptors through files in Dir
	// (FileExchange); then RestartIters iterations with everyone.
	Restart      bool
	RestartIters int
	// AfterRejoin, when set, runs in each rank once the iterations after
	// the rejoin passed (a check of what the rank holds, for instance).
	AfterRejoin func() error `json:"-"`
}

// KilledRank is one rank of a KillJob, over a context every rank built:
// two iterations with everyone; in the third, the victim posts its
// dispatch and SIGKILLs itself, and the survivors' calls must fail naming
// it within j.Timeout of the kill; then the survivors take a membership
// without it and run j.Iters more iterations, each checked against the
// masked oracle (drop reports included). A survivor writes how long its
// failure and its membership change took, then waits until every
// survivor wrote, so that none closes its engine while another may still
// talk to it.
func KilledRank(ctx context.Context, cfg a2a.Config, c *a2a.Context, j KillJob) error {
	if err := workload.RunRank(ctx, cfg, c, cfg.Rank, 31, 2); err != nil {
		return fmt.Errorf("rank %d, before the kill: %w", cfg.Rank, err)
	}
	l := c.Layout()
	in, err := workload.NewIteration(rand.New(rand.NewPCG(32, 1)), cfg, l)
	if err != nil {
		return err
	}
	grp := &in.Groups[l.Group(cfg.Rank)]
	din := a2a.DispatchInput{Tokens: grp.Tokens, X: grp.X, Scales: grp.Scales, Indices: grp.Indices}
	if cfg.Rank == j.Victim {
		if err := c.DispatchSend(ctx, &din); err != nil {
			return err
		}
		stamp := strconv.FormatInt(time.Now().UnixNano(), 10)
		if err := os.WriteFile(filepath.Join(j.Dir, "killed"), []byte(stamp), 0o644); err != nil {
			return err
		}
		return syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	dout := a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), X: make([]byte, l.OutputRows*l.TokenBytes),
		Scales: make([]float32, l.OutputRows*l.Scales)}
	err = c.Dispatch(ctx, &din, &dout)
	if err == nil {
		cout := a2a.CombineOutput{Out: make([]byte, grp.Tokens*l.CombineBytes), Weights: grp.Weights}
		err = c.Combine(ctx, &a2a.CombineInput{Y: make([]byte, l.OutputRows*l.CombineBytes)}, &cout)
	}
	failed := time.Now()
	var re *a2a.RankError
	if !errors.As(err, &re) || re.Rank != j.Victim || !errors.Is(err, a2a.ErrPeerLost) {
		return fmt.Errorf("rank %d: the iteration of the kill ended with %v, not rank %d lost", cfg.Rank, err, j.Victim)
	}
	stamp, rerr := os.ReadFile(filepath.Join(j.Dir, "killed"))
	ns, perr := strconv.ParseInt(string(stamp), 10, 64)
	if rerr != nil || perr != nil {
		return fmt.Errorf("rank %d: no kill time: %v %v", cfg.Rank, rerr, perr)
	}
	after := failed.Sub(time.Unix(0, ns))
	if after > j.Timeout {
		return fmt.Errorf("rank %d: failed %v after the kill, past the %v timeout", cfg.Rank, after, j.Timeout)
	}

	active := make([]bool, cfg.WorldSize)
	for q := range active {
		active[q] = q != j.Victim
	}
	start := time.Now()
	if err := c.SetActiveRanks(ctx, a2a.Membership{Generation: 1, Active: active}); err != nil {
		return fmt.Errorf("rank %d: set active ranks: %w", cfg.Rank, err)
	}
	joined := time.Since(start)
	if err := workload.RunRankActive(ctx, cfg, c, cfg.Rank, 33, j.Iters, active); err != nil {
		return fmt.Errorf("rank %d, without rank %d: %w", cfg.Rank, j.Victim, err)
	}
	report := fmt.Sprintf("%d %d", after.Microseconds(), joined.Microseconds())
	if j.Restart {
		if err := rejoin(ctx, cfg, c, j); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(j.Dir, "done-"+strconv.Itoa(cfg.Rank)), []byte(report), 0o644); err != nil {
		return err
	}
	return awaitDone(ctx, cfg, j)
}

// RestartedRank is the victim of a KillJob with Restart, started again as
// a new process, over a context whose backend was built to join: it joins
// generation 2 with every rank and runs the iterations with everyone.
func RestartedRank(ctx context.Context, cfg a2a.Config, c *a2a.Context, j KillJob) error {
	if err := rejoin(ctx, cfg, c, j); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(j.Dir, "done-"+strconv.Itoa(cfg.Rank)), []byte("0 0"), 0o644); err != nil {
		return err
	}
	return awaitDone(ctx, cfg, j)
}

// rejoin takes generation 2, every rank active, descriptors exchanged
// through files, and runs j.RestartIters iterations checked against the
// oracle.
func rejoin(ctx context.Context, cfg a2a.Config, c *a2a.Context, j KillJob) error {
	all := make([]bool, cfg.WorldSize)
	for q := range all {
		all[q] = true
	}
	x := FileExchange{Dir: j.Dir, Name: "gen2", Index: cfg.Rank, Members: cfg.WorldSize}
	if err := c.SetActiveRanks(ctx, a2a.Membership{Generation: 2, Active: all, Exchange: x}); err != nil {
		return fmt.Errorf("rank %d: rejoin: %w", cfg.Rank, err)
	}
	if err := workload.RunRankActive(ctx, cfg, c, cfg.Rank, 34, j.RestartIters, all); err != nil {
		return fmt.Errorf("rank %d, after the rejoin: %w", cfg.Rank, err)
	}
	if j.AfterRejoin != nil {
		if err := j.AfterRejoin(); err != nil {
			return fmt.Errorf("rank %d, after the rejoin: %w", cfg.Rank, err)
		}
	}
	return nil
}

// awaitDone waits until every rank that finishes wrote its result, so
// that none closes its engine while another may still talk to it.
func awaitDone(ctx context.Context, cfg a2a.Config, j KillJob) error {
	for q := range cfg.WorldSize {
		for q != j.Victim || j.Restart {
			if _, err := os.Stat(filepath.Join(j.Dir, "done-"+strconv.Itoa(q))); err == nil {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("rank %d: rank %d never finished: %w", cfg.Rank, q, ctx.Err())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// FileExchange is an all-gather among the processes of one machine
// through files in Dir: member Index writes its message to Name-Index
// (atomically, by rename) and reads everyone's once all Members wrote.
// It is the stand-in for a control plane that brings a restarted process
// and the survivors together.
type FileExchange struct {
	Dir, Name      string
	Index, Members int
}

// AllGather contributes data and returns every member's, in index order.
func (x FileExchange) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	path := func(i int) string { return filepath.Join(x.Dir, fmt.Sprintf("%s-%d", x.Name, i)) }
	if err := os.WriteFile(path(x.Index)+".tmp", data, 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(path(x.Index)+".tmp", path(x.Index)); err != nil {
		return nil, err
	}
	all := make([][]byte, x.Members)
	for i := range all {
		for {
			b, err := os.ReadFile(path(i))
			if err == nil {
				all[i] = b
				break
			}
			if !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("file exchange: member %d never wrote: %w", i, ctx.Err())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return all, nil
}

// KillResults checks, in the parent, how a KillJob of world ranks ended
// (spawnErr is rendezvous.Spawn's result, run with KeepGoing): the victim
// died, every survivor succeeded and reported; it logs their timings.
func KillResults(tb testing.TB, spawnErr error, world int, j KillJob) {
	tb.Helper()
	var se *rendezvous.SpawnError
	if !errors.As(spawnErr, &se) {
		tb.Fatalf("the job ended with %v; want the victim's death", spawnErr)
	}
	for _, x := range se.Ranks {
		if (x.Err != nil) != (x.Rank == j.Victim) {
			tb.Fatalf("rank %d ended with %v (exit %d)", x.Rank, x.Err, x.ExitCode)
		}
	}
	for q := range world {
		if q == j.Victim {
			if j.Restart {
				if _, err := os.Stat(filepath.Join(j.Dir, "done-"+strconv.Itoa(q))); err != nil {
					tb.Fatalf("the restarted rank %d left no result: %v", q, err)
				}
				tb.Logf("rank %d: restarted as a new process, rejoined; %d iterations with every rank equal to the oracle",
					q, j.RestartIters)
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(j.Dir, "done-"+strconv.Itoa(q)))
		if err != nil {
			tb.Fatalf("rank %d left no result: %v", q, err)
		}
		var failUS, joinUS int64
		if _, err := fmt.Sscan(string(b), &failUS, &joinUS); err != nil {
			tb.Fatal(err)
		}
		tb.Logf("rank %d: failed naming rank %d %v after the kill; took the new membership in %v; then %d iterations equal to the masked oracle",
			q, j.Victim, time.Duration(failUS)*time.Microsecond, time.Duration(joinUS)*time.Microsecond, j.Iters)
	}
}
