package cudabackend_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ferryrdma/ferry/a2a"
	"github.com/ferryrdma/ferry/a2a/cudabackend"
	"github.com/ferryrdma/ferry/a2a/cudabackend/emulated"
	"github.com/ferryrdma/ferry/a2a/internal/a2atest"
	"github.com/ferryrdma/ferry/fabric"
	_ "github.com/ferryrdma/ferry/ipc"
)

// BenchmarkControlPath measures the CPU proxy's control path: from the
// moment dispatch-send's ROUTE_DONE is raised (by this benchmark, playing
// every rank's kernels; no kernel runs) to the moment the rank's worker
// has exchanged the count rows, planned the receive side and raised
// PLAN_READY; beside it, in the same run, one immediate ping-pong of the
// same engines (one-way = half the round trip). W ranks in one process,
// each its own domain (the count rows cross the fabric), over ipc.
// Reported: route-to-plan p50/p99 of rank 0 and the ping-pong's one-way
// p50, and their ratio (the goal: within 2x of one ping-pong with spin).
//
//	go test ./a2a/cudabackend -run '^$' -bench BenchmarkControlPath -benchtime=300x
func BenchmarkControlPath(b *testing.B) {
	for _, c := range []struct {
		W    int
		spin bool
	}{{2, true}, {2, false}, {4, false}} {
		name := fmt.Sprintf("W%d/default", c.W)
		if c.spin {
			name = fmt.Sprintf("W%d/spin", c.W)
		}
		b.Run(name, func(b *testing.B) { controlPath(b, c.W, c.spin) })
	}
}

func controlPath(b *testing.B, W int, spin bool) {
	cfg := a2a.Config{WorldSize: W, MaxTokens: 8, Hidden: 64, DispatchType: a2a.BF16, CombineType: a2a.BF16,
		Experts: 2 * W, ExpertsPerToken: 2}
	l, err := cfg.Layout()
	if err != nil {
		b.Fatal(err)
	}
	poll, polling := fabric.PollAdaptive, cudabackend.PollAuto
	if spin {
		poll, polling = fabric.PollSpin, cudabackend.PollSpin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	engines := make([]*fabric.Engine, W)
	backends := make([]*cudabackend.Backend, W)
	errs := make([]error, W)
	x := a2atest.NewExchange(W)
	var wg sync.WaitGroup
	for r := range W {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := fabric.Open(ctx, fabric.Config{Transport: "ipc", NICs: 1, Poll: poll,
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				errs[r] = err
				return
			}
			engines[r] = e
			c := cfg
			c.Rank = r
			dev := emulated.NewDevice()
			backends[r], errs[r] = cudabackend.New(ctx, c, cudabackend.Options{Engine: e, Exchange: x.Member(r), Device: dev,
				Node: cudabackend.NewLocalNode(dev, 1).Member(0), Polling: polling})
		}()
	}
	wg.Wait()
	b.Cleanup(func() {
		for _, bk := range backends {
			if bk != nil {
				_ = bk.Close()
			}
		}
		for _, e := range engines {
			if e != nil {
				_ = e.Close(context.Background())
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	// Every rank's count row, written once as dispatch-send would: each
	// token to experts t and t+1 (mod E).
	m, K := cfg.MaxTokens, cfg.ExpertsPerToken
	idx := make([]uint32, m*K)
	for t := range m {
		for k := range K {
			idx[t*K+k] = uint32((t + k) % cfg.Experts)
		}
	}
	for r, bk := range backends {
		c := cfg
		c.Rank = r
		p, err := a2a.NewPlanner(c)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.PlanSend(idx, m); err != nil {
			b.Fatal(err)
		}
		copy(bk.TableWords()[l.Group(r)*l.RowWords:], p.Send().Row)
	}
	pp := newPingPong(b, engines[0], engines[1])

	wait := func(bk *cudabackend.Backend, s int, it uint32) {
		for !bk.Reached(s, it) {
			if ctx.Err() != nil {
				b.Fatalf("slot %d epoch %d never came", s, it)
			}
			runtime.Gosched() // the kernels' stand-in must not starve the worker of a core
		}
	}
	var route []int64
	var oneWay []int64
	for i := 0; i < b.N; i++ {
		it := uint32(i + 1)
		oneWay = append(oneWay, pp.roundTrip(b)/2)
		var d0 time.Duration
		var rw sync.WaitGroup
		for r, bk := range backends {
			rw.Add(1)
			go func() {
				defer rw.Done()
				start := time.Now()
				bk.Raise(cudabackend.SlotRouteDone, it)
				bk.Raise(cudabackend.SlotSendDone, it)
				wait(bk, cudabackend.SlotPlanReady, it)
				if r == 0 {
					d0 = time.Since(start)
				}
				// The rest of the iteration, at once: dispatch recv,
				// combine send and recv done; wait for the combine barrier.
				bk.Raise(cudabackend.SlotDrecvDone, it)
				bk.Raise(cudabackend.SlotCsendDone, it)
				bk.Raise(cudabackend.SlotCrecvDone, it)
				wait(bk, cudabackend.SlotDispatchFree, it)
			}()
		}
		rw.Wait()
		route = append(route, d0.Nanoseconds())
	}
	slices.Sort(route)
	slices.Sort(oneWay)
	p50 := func(v []int64) float64 { return float64(v[len(v)/2]) }
	b.ReportMetric(p50(route), "route-plan-p50-ns")
	b.ReportMetric(float64(route[len(route)*99/100]), "route-plan-p99-ns")
	b.ReportMetric(p50(oneWay), "pingpong-oneway-p50-ns")
	b.ReportMetric(p50(route)/p50(oneWay), "x-oneway")
}

// pingPong bounces one immediate between two engines.
type pingPong struct {
	e          [2]*fabric.Engine
	dst        [2]fabric.Descriptor // dst[i]: engine i's region
	cnt        [2]*fabric.ImmCounter
	bufs       []*fabric.HostBuffer
	regs       []*fabric.MemoryRegion
	regEngines []*fabric.Engine
}

// pingImm is outside the a2a contexts' immediate range.
const pingImm = 0x1234

func newPingPong(b *testing.B, e0, e1 *fabric.Engine) *pingPong {
	p := &pingPong{e: [2]*fabric.Engine{e0, e1}}
	for i, e := range p.e {
		hb, err := fabric.AllocHost(4096)
		if err != nil {
			b.Fatal(err)
		}
		r, err := e.RegisterHost(hb, fabric.AccessRemoteWrite)
		if err != nil {
			b.Fatal(err)
		}
		p.bufs, p.regs, p.regEngines = append(p.bufs, hb), append(p.regs, r), append(p.regEngines, e)
		if p.dst[i], err = r.Descriptor(); err != nil {
			b.Fatal(err)
		}
		if p.cnt[i], err = e.ImmCounter(pingImm); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		for i, r := range p.regs {
			_ = p.regEngines[i].Unregister(r)
			_ = p.bufs[i].Free()
		}
	})
	return p
}

// roundTrip sends 0 -> 1 -> 0 and returns the time it took in ns.
func (p *pingPong) roundTrip(b *testing.B) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t0 := time.Now()
	for from := range 2 {
		to := 1 - from
		if err := p.e[from].SubmitImm(fabric.ImmWrite{Imm: pingImm, Dst: p.dst[to]}, fabric.Completion{}); err != nil {
			b.Fatal(err)
		}
		if err := p.cnt[to].Wait(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(t0).Nanoseconds()
}
