//go:build linux

package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/a2a/workload"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
	"github.com/ferryrdma/ferry/fabric/rendezvous/rendezvoustest"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// The test binary re-executes itself as the ranks of a job: in the role
// "rank" (A2A_HOST_CHILD naming the transport) or "kill-rank" (a killJob
// in killEnv), TestMain runs one rank.
func TestMain(m *testing.M) {
	testutil.Main(m, testutil.Roles{
		"rank": func() error { return childRank(os.Getenv("A2A_HOST_CHILD")) },
		"kill-rank": func() error {
			var j killJob
			if err := json.Unmarshal([]byte(os.Getenv(killEnv)), &j); err != nil {
				return err
			}
			return killedRank(j)
		},
	})
}

const childIters = 4

func childRank(transport string) error {
	var cfg a2a.Config
	if err := json.Unmarshal([]byte(os.Getenv("A2A_HOST_CFG")), &cfg); err != nil {
		return err
	}
	seed, err := strconv.ParseUint(os.Getenv("A2A_HOST_SEED"), 10, 64)
	if err != nil {
		return err
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
	cfg.Rank = g.Rank()
	e, err := fabric.Open(ctx, fabric.Config{Transport: transport, NICs: cfg.NICsPerGPU, Node: "127.0.0.1",
		Logger: slog.New(slog.DiscardHandler)})
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
	b, err := host.New(ctx, cfg, host.Options{Engine: e, Exchange: g, Node: node})
	if err != nil {
		return err
	}
	c, err := a2a.New(cfg, b)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := workload.RunRank(ctx, cfg, c, cfg.Rank, seed, childIters); err != nil {
		return fmt.Errorf("rank %d: %w", cfg.Rank, err)
	}
	// Nobody closes its engine while a peer may still talk to it.
	return g.Barrier(ctx)
}

// TestHostProcesses runs the host backend with every rank its own
// process: node peers share memfd mappings passed over unix sockets, and
// everything else crosses libfabric's shm or tcp provider.
func TestHostProcesses(t *testing.T) {
	worlds := []a2a.Config{
		{WorldSize: 2, MaxTokens: 12, Hidden: 32, Scales: 2, DispatchType: a2a.FP8, CombineType: a2a.BF16,
			Experts: 6, ExpertsPerToken: 2, PrivateTokens: 2},
		{WorldSize: 4, NVLinkSize: 2, NICsPerGPU: 2, MaxTokens: 12, Hidden: 32, Scales: 2, DispatchType: a2a.BF16,
			CombineType: a2a.FP16, Experts: 10, ExpertsPerToken: 3, PrivateTokens: 2, ExpertPadding: 16},
		{WorldSize: 8, NVLinkSize: 4, ReplicaSize: 2, MaxTokens: 8, Hidden: 16, DispatchType: a2a.FP32,
			CombineType: a2a.FP32, Experts: 16, ExpertsPerToken: 4, PrivateTokens: 1},
	}
	if testing.Short() {
		worlds = worlds[:2]
	}
	for _, transport := range []string{"shm", "tcp;ofi_rxm"} {
		for _, cfg := range worlds {
			l, err := cfg.Layout()
			if err != nil {
				t.Fatal(err)
			}
			t.Run(fmt.Sprintf("%s/W%d_S%d_D%d", transport, l.WorldSize, l.NVLinkSize, l.ReplicaSize), func(t *testing.T) {
				if _, err := fabric.ChooseTransport(transport, fabric.DomainOptions{Node: "127.0.0.1"}); err != nil {
					if errors.Is(err, fabric.ErrNotSupported) || errors.Is(err, fabric.ErrUnknownProvider) {
						t.Skipf("libfabric %s not available here: %v", transport, err)
					}
					t.Fatal(err)
				}
				js, err := json.Marshal(cfg)
				if err != nil {
					t.Fatal(err)
				}
				rendezvoustest.MustRun(t, cfg.WorldSize, "rank", rendezvoustest.Options{Timeout: 120 * time.Second,
					Env: []string{"A2A_HOST_CHILD=" + transport, "A2A_HOST_CFG=" + string(js), "A2A_HOST_SEED=17"}})
			})
		}
	}
}

// TestHostProcessesIPCWideRows runs two ranks as processes over ipc, in
// one domain and in two, with dispatch rows long enough (2 KB) that they
// are streamed (rows.Copy) and token rows shared: the rows each rank
// stores into the other's memory must be published before the doorbells
// that say so, across processes.
func TestHostProcessesIPCWideRows(t *testing.T) {
	if _, err := fabric.ChooseTransport("ipc", fabric.DomainOptions{}); err != nil {
		if errors.Is(err, fabric.ErrNotSupported) || errors.Is(err, fabric.ErrUnknownProvider) {
			t.Skipf("needs the ipc transport (Linux shared memory): %v", err)
		}
		t.Fatal(err)
	}
	for _, nvlink := range []int{2, 1} {
		cfg := a2a.Config{WorldSize: 2, NVLinkSize: nvlink, MaxTokens: 16, Hidden: 2048, Scales: 4,
			DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 4, PrivateTokens: 2}
		t.Run(fmt.Sprintf("S%d", nvlink), func(t *testing.T) {
			js, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			rendezvoustest.MustRun(t, cfg.WorldSize, "rank", rendezvoustest.Options{Timeout: 120 * time.Second,
				Env: []string{"A2A_HOST_CHILD=ipc", "A2A_HOST_CFG=" + string(js), "A2A_HOST_SEED=23"}})
		})
	}
}
