//go:build linux

package cudabackend_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/cudabackend/emulated"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	"github.com/ferryrdma/ferry/a2a/workload"
	"github.com/ferryrdma/ferry/cuda"
	"github.com/ferryrdma/ferry/cuda/emu"
	_ "github.com/ferryrdma/ferry/efa"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/fabrictest"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
	"github.com/ferryrdma/ferry/fabric/rendezvous/rendezvoustest"
	"github.com/ferryrdma/ferry/internal/testutil"
)

// Node ranks as processes: the test binary re-executes itself as the
// ranks of a job (the role "rank", its procJob in procJobEnv), each with
// its own engine and backend,
// the domain's buffers shared through a2a/cudabackend.ProcessNode: memfds on the
// emulator, CUDA VMM exports on a GPU.

const procJobEnv = "FERRY_A2A_CUDA_PROC_JOB"

func TestMain(m *testing.M) {
	testutil.Main(m, testutil.Roles{"rank": func() error {
		var j procJob
		if err := json.Unmarshal([]byte(os.Getenv(procJobEnv)), &j); err != nil {
			return err
		}
		return runProcRank(j)
	}})
}

// procJob is what every rank of a job is told.
type procJob struct {
	Config    a2a.Config
	Device    string // "emu" or "gpu" (this rank's GPU, by local rank)
	Transport string
	Seed      uint64
	Iters     int
	// Phase bounds each iteration of each rank.
	Phase time.Duration
	// Kill, when set, makes the job a SIGKILL test (a2atest.KilledRank)
	// instead of Iters iterations.
	Kill *a2atest.KillJob
}

// runProcRank is one rank: Iters iterations checked against the oracle,
// with every rank's own transport buffers poisoned while all are idle
// between iterations; then everything closed, and on the emulator no
// memory file left open or mapped.
func runProcRank(j procJob) (err error) {
	rc, err := rendezvous.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	g, err := rendezvous.Join(ctx, rc)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, g.Close()) }()
	cfg := j.Config
	cfg.Rank = g.Rank()
	l, err := cfg.Layout()
	if err != nil {
		return err
	}
	fc := fabric.Config{Transport: j.Transport, NICs: l.NICsPerGPU, Node: "127.0.0.1", Logger: slog.New(slog.DiscardHandler)}
	var timeout time.Duration
	if j.Kill != nil {
		// Notice the victim quickly: its process (shm) or its heartbeats
		// (tcp, after the handshake timeout).
		fc.LivenessInterval, fc.HandshakeTimeout, timeout = 100*time.Millisecond, 2*time.Second, j.Kill.Timeout
	}
	eng, err := fabric.Open(ctx, fc)
	if err != nil {
		return err
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		err = errors.Join(err, eng.Close(cctx))
	}()
	var dev cudabackend.ExportingDevice = emulated.NewDevice()
	if j.Device == "gpu" {
		d, err := cuda.GetDevice(0)
		if err != nil {
			return err
		}
		c, err := d.PrimaryContext()
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, c.Close()) }()
		if dev, err = cudabackend.NewDriverDevice(c); err != nil {
			return err
		}
	}
	fds := memfds()
	node, err := cudabackend.NewProcessNode(cfg, g, dev)
	if err != nil {
		return err
	}
	b, err := cudabackend.New(ctx, cfg, cudabackend.Options{Engine: eng, Exchange: g, Device: dev, Node: node, Timeout: timeout})
	if err != nil {
		return err
	}
	c, err := a2a.New(cfg, b)
	if err != nil {
		return errors.Join(err, b.Close())
	}
	if j.Kill != nil {
		err = errors.Join(a2atest.KilledRank(ctx, cfg, c, *j.Kill), c.Close())
	} else {
		err = procIterations(ctx, j, cfg, &l, c, g, dev, node)
		// Every rank is done with every rank's buffers before any closes.
		err = errors.Join(err, g.Barrier(ctx), c.Close())
	}
	if n := eng.Regions(); n != 0 {
		err = errors.Join(err, fmt.Errorf("%d memory regions still registered after closing", n))
	}
	if after := memfds(); j.Device == "emu" && after != fds {
		err = errors.Join(err, fmt.Errorf("%d memfd descriptors and mappings after closing the backend, %d before it", after, fds))
	}
	if err != nil {
		return fmt.Errorf("rank %d: %w", cfg.Rank, err)
	}
	return nil
}

func procIterations(ctx context.Context, j procJob, cfg a2a.Config, l *a2a.Layout, c *a2a.Context, g *rendezvous.Group,
	dev cudabackend.Device, node *cudabackend.ProcessNode) error {
	send, recv := node.Buffers()
	for it := 0; it < j.Iters; it++ {
		// Poison this rank's buffers (not the sync slots at the tail of
		// the receive buffer) while every rank is idle.
		if err := g.Barrier(ctx); err != nil {
			return err
		}
		for _, m := range []struct {
			mem cudabackend.Memory
			n   int64
		}{{send, l.SendBytes}, {recv, l.RecvBytes}} {
			if err := dev.Upload(m.mem.Addr(), bytes.Repeat([]byte{0xa5 ^ byte(it)}, int(m.n))); err != nil {
				return err
			}
		}
		if err := g.Barrier(ctx); err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, j.Phase)
		err := workload.RunRank(pctx, cfg, c, cfg.Rank, j.Seed+uint64(it), 1)
		cancel()
		if err != nil {
			return fmt.Errorf("iteration %d: %w", it, err)
		}
	}
	return nil
}

// memfds counts the descriptors and mappings of host memory files
// (emulator memory: fabric.AllocHost and its imports).
func memfds() int {
	n := 0
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.Contains(l, "ferry-host") {
			n++
		}
	}
	maps, _ := os.ReadFile("/proc/self/maps")
	return n + strings.Count(string(maps), "ferry-host")
}

// runProcJob runs j as W processes of this test binary.
func runProcJob(t *testing.T, j procJob) {
	t.Helper()
	fabrictest.RequireTransport(t, j.Transport, "127.0.0.1")
	js, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	// The ranks' output goes to the test log.
	opts := rendezvoustest.Options{Env: []string{procJobEnv + "=" + string(js)}, Timeout: 5 * time.Minute, KeepGoing: j.Kill != nil}
	if j.Kill != nil {
		_, err = rendezvoustest.Run(t, j.Config.WorldSize, "rank", opts)
		a2atest.KillResults(t, err, j.Config.WorldSize, *j.Kill)
		return
	}
	rendezvoustest.MustRun(t, j.Config.WorldSize, "rank", opts)
}

// TestKilledRankProcessesEmu: the CUDA backend on the emulator, ranks as
// processes over shm, node ranks sharing memfds; one is SIGKILLed
// mid-iteration. The survivors' calls fail naming it (the worker sees it
// lost and the kernels' waits give up), then the survivors carry on
// without it, every iteration equal to the masked oracle; its node peer
// carries on alone in its domain, and closing leaves no memory file open.
func TestKilledRankProcessesEmu(t *testing.T) {
	_, err := emu.Compiler()
	testutil.SkipIfNotSupported(t, "cudaemu", err)
	j := procJob{Transport: "shm", Device: "emu", Config: a2a.Config{WorldSize: 4, NVLinkSize: 2, MaxTokens: 6,
		Hidden: 40, Scales: 3, DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 3,
		PrivateTokens: 1}, Kill: &a2atest.KillJob{Victim: 1, Dir: t.TempDir(), Timeout: 10 * time.Second, Iters: 3}}
	runProcJob(t, j)
}

// TestNodeProcessesEmu: the CUDA backend on the emulator with node ranks
// as processes sharing memfds through ProcessNode (the protocol a GPU's
// VMM exports use): two domains of two over shm (node and RDMA paths,
// fp8 with scales, a one-copy window so rows are pushed and pulled), and
// one domain of four with replicas over tcp (only count rows and signals
// on the fabric, through stand-in regions); every iteration equal to the
// oracle, buffers poisoned between iterations.
func TestNodeProcessesEmu(t *testing.T) {
	_, err := emu.Compiler()
	testutil.SkipIfNotSupported(t, "cudaemu", err)
	for name, j := range map[string]procJob{
		"shm/W4_S2_fp8_bf16": {Transport: "shm", Config: a2a.Config{WorldSize: 4, NVLinkSize: 2, MaxTokens: 6,
			Hidden: 40, Scales: 3, DispatchType: a2a.FP8, CombineType: a2a.BF16, Experts: 8, ExpertsPerToken: 3,
			PrivateTokens: 1}},
		"tcp/W4_S4_D2_bf16_fp32": {Transport: "tcp;ofi_rxm", Config: a2a.Config{WorldSize: 4, NVLinkSize: 4,
			ReplicaSize: 2, MaxTokens: 5, Hidden: 24, DispatchType: a2a.BF16, CombineType: a2a.FP32, Experts: 6,
			ExpertsPerToken: 2, PrivateTokens: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			j.Device, j.Seed, j.Iters, j.Phase = "emu", 11, 3, 30*time.Second
			runProcJob(t, j)
		})
	}
}
