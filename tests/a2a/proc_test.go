//go:build linux

package a2a_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/ferryrdma/ferry/internal/testutil"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/cudabackend/emulated"
	"github.com/ferryrdma/ferry/a2a/host"
	"github.com/ferryrdma/ferry/a2a/reference"
	_ "github.com/ferryrdma/ferry/efa"
	"github.com/ferryrdma/ferry/fabric"
	"github.com/ferryrdma/ferry/fabric/rendezvous"
	_ "github.com/ferryrdma/ferry/ipc"
)

// job is what the parent tells every rank (as JSON in jobEnv).
type job struct {
	Config    a2a.Config
	Transport string
	// Backend is "host" (or empty) or "cuda-emu" (the CUDA backend on the
	// CPU emulator).
	Backend string
	Seed    uint64
	Iters   int
	// PathsFile is where rank 0 writes the union of the path classes
	// every rank's planner chose (a bit per a2a.Path).
	PathsFile string
}

const jobEnv = "FERRY_A2A_TEST_JOB"

// phaseTimeout bounds every wait of a rank; the parent bounds the job.
const phaseTimeout = 30 * time.Second

// runRankNoLeaks is runRank, then a check that closing everything ended
// every goroutine the rank started (bounded wait: exits are asynchronous).
func runRankNoLeaks(j job) error {
	goroutines := testutil.SnapshotGoroutines()
	if err := runRank(j); err != nil {
		return err
	}
	if err := goroutines.Leaked(); err != nil {
		return fmt.Errorf("after closing everything: %w", err)
	}
	return nil
}

// runRank is one rank of a job: it runs j.Iters iterations against the
// oracle, poisoning its buffers between phases, and misuses the call
// order on the way.
func runRank(j job) (err error) {
	rc, err := rendezvous.ConfigFromEnv(os.LookupEnv)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
	eng, err := fabric.Open(ctx, fabric.Config{Transport: j.Transport, NICs: l.NICsPerGPU, Node: "127.0.0.1",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		err = errors.Join(err, eng.Close(cctx))
	}()
	pn, err := host.NewProcessNode(cfg, g)
	if err != nil {
		return err
	}
	node := &poisonNode{NodeMemory: pn, me: cfg.Rank % l.NVLinkSize, sendBytes: int(l.SendBytes), recvBytes: int(l.RecvBytes)}
	var b a2a.Backend
	switch j.Backend {
	case "", "host":
		// Doorbells whatever the CPUs: the ipc worlds exercise them.
		b, err = host.New(ctx, cfg, host.Options{Engine: eng, Exchange: g, Node: node, Doorbells: host.DoorbellsOn})
	case "cuda-emu":
		b, err = cudabackend.New(ctx, cfg, cudabackend.Options{Engine: eng, Exchange: g, Device: emulated.NewDevice(),
			Node: emulated.NewHostNode(node, node.me)})
	default:
		err = fmt.Errorf("unknown backend %q", j.Backend)
	}
	if err != nil {
		return err
	}
	c, err := a2a.New(cfg, b)
	if err != nil {
		return err
	}
	paths, err := iterate(ctx, j, cfg, c, g, node)
	// Everyone is done with everyone's buffers before anyone closes.
	if berr := g.Barrier(ctx); err == nil {
		err = berr
	}
	err = errors.Join(err, c.Close())
	if n := eng.Regions(); n != 0 {
		err = errors.Join(err, fmt.Errorf("%d memory regions still registered after closing the context", n))
	}
	if err != nil {
		return fmt.Errorf("rank %d: %w", cfg.Rank, err)
	}
	all, err := g.AllGather(ctx, binary.LittleEndian.AppendUint32(nil, paths))
	if err != nil || cfg.Rank != 0 || j.PathsFile == "" {
		return err
	}
	var union uint32
	for _, m := range all {
		union |= binary.LittleEndian.Uint32(m)
	}
	return os.WriteFile(j.PathsFile, binary.LittleEndian.AppendUint32(nil, union), 0o644)
}

// iterate runs the iterations and returns the path classes seen.
func iterate(ctx context.Context, j job, cfg a2a.Config, c *a2a.Context, g *rendezvous.Group, node *poisonNode) (uint32, error) {
	l := c.Layout()
	h := l.Group(cfg.Rank)
	planner, err := a2a.NewPlanner(cfg)
	if err != nil {
		return 0, err
	}
	var paths uint32
	rng := rand.New(rand.NewPCG(j.Seed, 7))
	// quiet is a point where every rank is idle: each poisons its own
	// buffers between two barriers.
	quiet := func(it int) error {
		if err := g.Barrier(ctx); err != nil {
			return err
		}
		node.poison(it)
		return g.Barrier(ctx)
	}
	for it := 0; it < j.Iters; it++ {
		in := &iteration{cfg: cfg, l: l, it: it, groups: drawGroups(rng, l, it)}
		if in.want, err = reference.Dispatch(cfg, in.groups); err != nil {
			return 0, err
		}
		grp := &in.groups[h]
		if err := planner.PlanSend(grp.Indices, grp.Tokens); err != nil {
			return 0, err
		}
		for i := 0; i < grp.Tokens*l.ExpertsPerToken; i++ {
			paths |= 1 << planner.Send().Copy(i).Path
		}
		pctx, cancel := context.WithTimeout(ctx, phaseTimeout)
		err = in.run(pctx, c, func() error { return quiet(2 * it) })
		cancel()
		if err != nil {
			return 0, fmt.Errorf("iteration %d: %w", it, err)
		}
		if err := quiet(2*it + 1); err != nil {
			return 0, err
		}
	}
	return paths, nil
}

// iteration is one iteration's inputs (every group's) and the oracle's
// dispatch results (every rank's).
type iteration struct {
	cfg    a2a.Config // this rank's
	l      *a2a.Layout
	it     int
	groups []reference.GroupInput
	want   []reference.Dispatched
}

// run is this rank's part: dispatch, check, quiet (poison), combine,
// check; the first iteration also misuses the call order in every state
// and passes a bad argument.
func (in *iteration) run(ctx context.Context, c *a2a.Context, quiet func() error) error {
	l, r := in.l, in.cfg.Rank
	grp := &in.groups[l.Group(r)]
	check := func(state string) error {
		if in.it != 0 {
			return nil
		}
		return misuse(ctx, c, state)
	}
	if err := check("idle"); err != nil {
		return err
	}
	if in.it == 0 {
		// A bad argument is refused before anything is sent.
		bad := a2a.DispatchInput{Tokens: 1, X: make([]byte, l.TokenBytes), Scales: make([]float32, l.Scales),
			Indices: make([]uint32, l.ExpertsPerToken)}
		bad.Indices[0] = uint32(l.Experts)
		if err := c.DispatchSend(ctx, &bad); !errors.Is(err, a2a.ErrInvalidArgument) {
			return fmt.Errorf("expert %d out of range: %v, want ErrInvalidArgument", l.Experts, err)
		}
	}
	din := a2a.DispatchInput{Tokens: grp.Tokens, X: grp.X, Scales: grp.Scales, Indices: grp.Indices}
	if err := c.DispatchSend(ctx, &din); err != nil {
		return fmt.Errorf("dispatch send: %w", err)
	}
	if err := check("dispatch sent"); err != nil {
		return err
	}
	dout := a2a.DispatchOutput{ExpertTokens: make([]int32, l.LocalExperts), ExpertOffsets: make([]int32, l.LocalExperts+1),
		X: make([]byte, l.OutputRows*l.TokenBytes), Scales: make([]float32, l.OutputRows*l.Scales)}
	if err := c.DispatchRecv(ctx, &dout); err != nil {
		return fmt.Errorf("dispatch recv: %w", err)
	}
	if err := checkDispatch(l, &in.want[r], &dout); err != nil {
		return err
	}
	if err := check("dispatched"); err != nil {
		return err
	}
	if err := quiet(); err != nil {
		return err
	}
	// This rank plays its experts on what it received; the oracle combines
	// the outputs of every rank's expected dispatch, computed the same way.
	if err := c.CombineSend(ctx, &a2a.CombineInput{Y: expertOutputs(l, dout.X)}); err != nil {
		return fmt.Errorf("combine send: %w", err)
	}
	if err := check("combine sent"); err != nil {
		return err
	}
	// Odd iterations add to what the output held.
	accumulate := in.it%2 == 1
	prev := make([][]byte, l.Groups)
	for h := range prev {
		prev[h] = previous(l, h, in.groups[h].Tokens)
	}
	out := append([]byte(nil), prev[l.Group(r)]...)
	if err := c.CombineRecv(ctx, &a2a.CombineOutput{Out: out, Weights: grp.Weights, Accumulate: accumulate}); err != nil {
		return fmt.Errorf("combine recv: %w", err)
	}
	ys := make([][]byte, len(in.want))
	for q := range in.want {
		ys[q] = expertOutputs(l, in.want[q].X)
	}
	wantOut, err := reference.Combine(in.cfg, in.groups, in.want, ys, prev, accumulate)
	if err != nil {
		return err
	}
	var base []byte
	if accumulate {
		base = prev[l.Group(r)]
	}
	return checkCombine(l, grp, wantOut[l.Group(r)], out, base)
}

// decodeJob reads the job of a child rank.
func decodeJob(s string) (job, error) {
	var j job
	err := json.Unmarshal([]byte(s), &j)
	return j, err
}
