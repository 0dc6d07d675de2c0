//go:build linux

package host_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/fabrictest"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
	"github.com/ferryrdma/ferry/fabric/rendezvous/rendezvoustest"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// killJob is what the parent of TestKilledRankProcesses tells each rank.
type killJob struct {
	a2atest.KillJob
	Config    a2a.Config
	Transport string
	// Restarted marks the victim's second life (KillJob.Restart): a new
	// process that joins the survivors.
	Restarted bool
}

const killEnv = "A2A_HOST_KILL"

// restartedRank is the victim started again: its own engine, a backend
// built to join over a ProcessNode (it maps its node peers' buffers, and
// they its own, when it joins), and a2atest.RestartedRank.
func restartedRank(j killJob) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := j.Config
	cfg.Rank = j.Victim
	return runKillRank(ctx, j, cfg, nil, a2atest.RestartedRank)
}

// killedRank builds one rank of a killJob and runs a2atest.KilledRank.
func killedRank(j killJob) error {
	if j.Restarted {
		return restartedRank(j)
	}
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
	return runKillRank(ctx, j, cfg, g, a2atest.KilledRank)
}

// runKillRank opens rank cfg.Rank's engine, ProcessNode and context (with
// g as the exchange; a nil g builds a backend that joins) and runs role.
func runKillRank(ctx context.Context, j killJob, cfg a2a.Config, g *rendezvous.Group,
	role func(context.Context, a2a.Config, *a2a.Context, a2atest.KillJob) error) error {
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
	// Doorbells whatever the CPUs: the ipc worlds exercise them here too.
	opt := host.Options{Engine: e, Timeout: j.Timeout, Join: g == nil, Doorbells: host.DoorbellsOn}
	var ex host.Exchanger // a nil *rendezvous.Group must stay a nil interface
	if g != nil {
		ex, opt.Exchange = g, g
	}
	if opt.Node, err = host.NewProcessNode(cfg, ex); err != nil {
		return err
	}
	b, err := host.New(ctx, cfg, opt)
	if err != nil {
		return err
	}
	c, err := a2a.New(cfg, b)
	if err != nil {
		return err
	}
	defer c.Close()
	j.AfterRejoin = nodeMappings(cfg, j.Transport == "ipc")
	return role(ctx, cfg, c, j.KillJob)
}

// nodeMappings checks that a rank maps exactly the node buffers of its
// domain's current members, two memfds each (a ProcessNode's, named
// ferry-a2a-*): none left of a dead incarnation. Over ipc the transport
// maps the receive buffers of the peers it writes to as well (the node
// peers' are the same files; one more file per rank of another domain),
// so there the distinct files are counted.
func nodeMappings(cfg a2a.Config, ipc bool) func() error {
	return func() error {
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			return err
		}
		l, err := cfg.Layout()
		if err != nil {
			return err
		}
		if ipc {
			files := map[string]bool{}
			for _, line := range bytes.Split(maps, []byte("\n")) {
				if f := bytes.Fields(line); len(f) >= 6 && bytes.HasPrefix(f[5], []byte("/memfd:ferry-a2a-")) {
					files[string(f[4])] = true
				}
			}
			if n, want := len(files), 2*l.NVLinkSize+l.WorldSize-l.NVLinkSize; n != want {
				return fmt.Errorf("%d node and peer buffer files mapped, want %d (two per member of the domain, one per other rank):\n%s",
					n, want, maps)
			}
			return nil
		}
		n := bytes.Count(maps, []byte("/memfd:ferry-a2a-"))
		if n != 2*l.NVLinkSize {
			return fmt.Errorf("%d node buffer mappings, want %d (two per member of the domain):\n%s", n, 2*l.NVLinkSize, maps)
		}
		return nil
	}
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
	type world struct {
		cfg    a2a.Config
		victim int
	}
	worlds := []world{{a2a.Config{WorldSize: 4, NVLinkSize: 2, MaxTokens: 10, Hidden: 24, Scales: 2,
		DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 10, ExpertsPerToken: 3, PrivateTokens: 2}, 3}}
	if os.Getenv("FERRY_A2A_FULL") != "" {
		// make test-a2a-full: a lost replica whose group's other replica
		// serves in its place, a world of single-rank domains, two NICs.
		worlds = append(worlds,
			world{a2a.Config{WorldSize: 8, NVLinkSize: 4, ReplicaSize: 2, MaxTokens: 8, Hidden: 16,
				DispatchType: a2a.BF16, CombineType: a2a.FP32, Experts: 16, ExpertsPerToken: 4, PrivateTokens: 1}, 5},
			world{a2a.Config{WorldSize: 4, NICsPerGPU: 2, MaxTokens: 9, Hidden: 20, DispatchType: a2a.FP32,
				CombineType: a2a.FP16, Experts: 7, ExpertsPerToken: 2, PrivateTokens: 1, ExpertPadding: 16}, 2})
	} else {
		t.Logf("one world; FERRY_A2A_FULL=1 (make test-a2a-full) runs more")
	}
	for _, w := range worlds {
		// ipc: the ranks ring each other's doorbells (no engine in between).
		for _, transport := range []string{"shm", "tcp;ofi_rxm", "ipc"} {
			cfg := w.cfg
			l, err := cfg.Layout()
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s/W%d_S%d_D%d_victim%d", transport, l.WorldSize, l.NVLinkSize, l.ReplicaSize, w.victim)
			t.Run(name, func(t *testing.T) {
				fabrictest.RequireTransport(t, transport, "127.0.0.1")
				j := killJob{KillJob: a2atest.KillJob{Victim: w.victim, Dir: t.TempDir(), Timeout: 10 * time.Second, Iters: 3},
					Config: cfg, Transport: transport}
				js, err := json.Marshal(j)
				if err != nil {
					t.Fatal(err)
				}
				_, err = rendezvoustest.Run(t, cfg.WorldSize, "kill-rank", rendezvoustest.Options{Timeout: 120 * time.Second,
					Env: []string{killEnv + "=" + string(js)}, KeepGoing: true})
				a2atest.KillResults(t, err, cfg.WorldSize, j.KillJob)
			})
		}
	}
}

// TestKilledRankRestartsProcesses: as TestKilledRankProcesses, then the
// victim comes back as a new process (new buffers, new addresses, a
// backend built to join): every rank joins generation 2 with a descriptor
// exchange among the members, and they run on with every rank, equal to
// the oracle. In the world of two-rank domains the victim's node peer
// stayed active: it maps the new process's buffers in place of the dead
// one's, and the new process maps its own, during the membership change;
// afterwards each rank maps exactly its domain's current buffers.
func TestKilledRankRestartsProcesses(t *testing.T) {
	type run struct {
		cfg       a2a.Config
		victim    int
		transport string
	}
	single := a2a.Config{WorldSize: 3, MaxTokens: 8, Hidden: 16, Scales: 1, DispatchType: a2a.FP8, CombineType: a2a.BF16,
		Experts: 7, ExpertsPerToken: 2, PrivateTokens: 1}
	pairs := a2a.Config{WorldSize: 4, NVLinkSize: 2, MaxTokens: 8, Hidden: 16, Scales: 2, DispatchType: a2a.FP8,
		CombineType: a2a.BF16, Experts: 10, ExpertsPerToken: 3, PrivateTokens: 2}
	runs := []run{{single, 2, "shm"}, {single, 2, "tcp;ofi_rxm"}, {pairs, 1, "shm"}, {pairs, 1, "ipc"}}
	if os.Getenv("FERRY_A2A_FULL") != "" {
		// make test-a2a-full: the node peer's rejoin over tcp too, and a
		// replica lost in a domain of four whose other members stay.
		runs = append(runs, run{pairs, 1, "tcp;ofi_rxm"},
			run{a2a.Config{WorldSize: 8, NVLinkSize: 4, ReplicaSize: 2, MaxTokens: 8, Hidden: 16,
				DispatchType: a2a.BF16, CombineType: a2a.FP32, Experts: 16, ExpertsPerToken: 4, PrivateTokens: 1}, 6, "shm"})
	}
	for _, rn := range runs {
		cfg, transport := rn.cfg, rn.transport
		name := fmt.Sprintf("%s/W%d_S%d_victim%d", transport, cfg.WorldSize, max(cfg.NVLinkSize, 1), rn.victim)
		t.Run(name, func(t *testing.T) {
			fabrictest.RequireTransport(t, transport, "127.0.0.1")
			j := killJob{KillJob: a2atest.KillJob{Victim: rn.victim, Dir: t.TempDir(), Timeout: 10 * time.Second, Iters: 2,
				Restart: true, RestartIters: 3}, Config: cfg, Transport: transport}
			js, err := json.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(120 * time.Second)
			job := make(chan error, 1)
			go func() {
				_, err := rendezvoustest.Run(t, cfg.WorldSize, "kill-rank", rendezvoustest.Options{Timeout: time.Until(deadline),
					Env: []string{killEnv + "=" + string(js)}, KeepGoing: true})
				job <- err
			}()
			// The restarted victim: started once the first one died.
			var restarted *testutil.Child
			for restarted == nil {
				if _, err := os.Stat(filepath.Join(j.Dir, "killed")); err == nil {
					again := j
					again.Restarted = true
					ajs, err := json.Marshal(again)
					if err != nil {
						t.Fatal(err)
					}
					restarted = testutil.Spawn(t, "kill-rank", testutil.SpawnOptions{Env: []string{killEnv + "=" + string(ajs)},
						Timeout: time.Until(deadline)})
					continue
				}
				if len(job) > 0 || time.Now().After(deadline) {
					t.Fatalf("the victim was not killed; the job: %v", <-job)
				}
				time.Sleep(10 * time.Millisecond)
			}
			err = <-job
			if rerr := restarted.Wait(); rerr != nil {
				t.Fatalf("the restarted rank: %v", rerr)
			}
			a2atest.KillResults(t, err, cfg.WorldSize, j.KillJob)
		})
	}
}
