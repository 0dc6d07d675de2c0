//go:build linux

package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/a2a/internal/workload"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/fabrictest"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
)

// killJob is what the parent of TestKilledRankProcesses tells each rank.
type killJob struct {
	Config    a2a.Config
	Transport string
	Victim    int    // the rank that SIGKILLs itself mid-iteration
	Dir       string // where ranks leave the kill time and their results
	Timeout   time.Duration
	Iters     int // iterations the survivors run without the victim
}

const killEnv = "A2A_HOST_KILL"

// killedRank is one rank of a killJob: two iterations with everyone; in
// the third, the victim posts its dispatch and SIGKILLs itself, and the
// survivors' calls must fail naming it within the backend's timeout;
// then the survivors take a membership without it and run j.Iters more
// iterations, each checked against the masked oracle. A survivor writes
// how long its failure took after the kill.
func killedRank(j killJob) error {
	rc, err := rendezvous.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	g, err := rendezvous.Join(ctx, rc)
	if err != nil {
		return err
	}
	defer g.Close()
	cfg := j.Config
	cfg.Rank = g.Rank()
	e, err := fabric.Open(ctx, fabric.Config{Transport: j.Transport, NICs: cfg.NICsPerGPU, Node: "127.0.0.1",
		LivenessInterval: 100 * time.Millisecond, HandshakeTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		_ = e.Close(cctx)
	}()
	node, err := host.NewProcessNode(cfg, g)
	if err != nil {
		return err
	}
	b, err := host.New(ctx, cfg, host.Options{Engine: e, Exchange: g, Node: node, Timeout: j.Timeout})
	if err != nil {
		return err
	}
	c, err := a2a.New(cfg, b)
	if err != nil {
		return err
	}
	defer c.Close()
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
	if err := os.WriteFile(filepath.Join(j.Dir, "done-"+strconv.Itoa(cfg.Rank)), []byte(report), 0o644); err != nil {
		return err
	}
	// Nobody closes its engine while a survivor may still talk to it.
	for q := range cfg.WorldSize {
		for q != j.Victim {
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

// TestKilledRankProcesses: ranks are processes over libfabric's shm and
// tcp providers; one is SIGKILLed mid-iteration. The survivors' calls
// fail naming it within the backend's timeout (on shm within the engine's
// liveness interval, when its process check finds the process gone; on
// tcp once a heartbeat stays unanswered for the handshake timeout, 2 s
// here), then the survivors carry on without it,
// every iteration equal to the masked oracle, its experts' rows dropped
// and reported. The victim's node peer carries on alone in its domain.
func TestKilledRankProcesses(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := a2a.Config{WorldSize: 4, NVLinkSize: 2, MaxTokens: 10, Hidden: 24, Scales: 2, DispatchType: a2a.FP8,
		CombineType: a2a.BF16, Experts: 10, ExpertsPerToken: 3, PrivateTokens: 2}
	for _, transport := range []string{"shm", "tcp;ofi_rxm"} {
		t.Run(transport, func(t *testing.T) {
			fabrictest.RequireTransport(t, transport, "127.0.0.1")
			const victim = 3
			j := killJob{Config: cfg, Transport: transport, Victim: victim, Dir: t.TempDir(), Timeout: 10 * time.Second, Iters: 3}
			js, err := json.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			err = rendezvous.Spawn(ctx, cfg.WorldSize, []string{exe, "-test.run=^$"},
				append(os.Environ(), killEnv+"="+string(js)), rendezvous.SpawnOptions{KeepGoing: true})
			var se *rendezvous.SpawnError
			if !errors.As(err, &se) {
				t.Fatalf("the job ended with %v; want the victim's death", err)
			}
			for _, x := range se.Ranks {
				if (x.Err != nil) != (x.Rank == victim) {
					t.Fatalf("rank %d ended with %v (exit %d)", x.Rank, x.Err, x.ExitCode)
				}
			}
			for q := range cfg.WorldSize {
				if q == victim {
					continue
				}
				b, err := os.ReadFile(filepath.Join(j.Dir, "done-"+strconv.Itoa(q)))
				if err != nil {
					t.Fatalf("rank %d left no result: %v", q, err)
				}
				var failUS, joinUS int64
				if _, err := fmt.Sscan(string(b), &failUS, &joinUS); err != nil {
					t.Fatal(err)
				}
				t.Logf("rank %d: failed naming rank %d %v after the kill; took the new membership in %v; then %d iterations equal to the masked oracle",
					q, victim, time.Duration(failUS)*time.Microsecond, time.Duration(joinUS)*time.Microsecond, j.Iters)
			}
		})
	}
}
